"""The tool loop: generate, run the requested tools, feed the results back, repeat.

Pure over an injected ``generate(messages) -> (text, tool_calls)``: the turn runner wires a
real model in, tests wire a script. A round is one generation; when it asks for tools they
run in order (async, each under a timeout), their results go back as ``tool`` messages, and
the next round starts. The loop ends on a reply without calls, after ``max_rounds`` rounds
(default 5, as in SillyTavern), or after a round with a stealth tool (stealth results are
hidden and get no follow-up generation).

A tool never breaks the loop: an unknown name, arguments that break the schema, an exception
or a timeout become an invocation marked ``error`` whose message goes back to the model, so it
can correct itself. Only an abort, or a failure of ``generate`` itself, ends the loop early.

Each requested call runs exactly once: a call the model asks for twice runs twice, while the
same call reported twice in one reply (same provider id and same identity, as a stream may
repeat it) runs once.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from tavernkit.errors import GenerateTaskError
from tavernkit.models.chat import ToolInvocation
from tavernkit.tools.calls import ToolCall, coerce_tool_call
from tavernkit.tools.errors import ToolCallParseError
from tavernkit.tools.identity import canonical_json
from tavernkit.tools.registry import FunctionTool
from tavernkit.tools.validate import validate_arguments

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "DEFAULT_TOOL_TIMEOUT",
    "AbortFlag",
    "Generate",
    "InvocationRecord",
    "ToolLoopResult",
    "execute_tool_calls",
    "result_text",
    "run_tool_loop",
]

DEFAULT_MAX_ROUNDS = 5
DEFAULT_TOOL_TIMEOUT = 60.0

Message = dict[str, Any]
Generate = Callable[[list[Message]], Awaitable[tuple[str, Sequence[Any]]]]
FinalGenerate = Callable[[list[Message]], Awaitable[str]]


class AbortFlag(Protocol):
    """An ``asyncio.Event`` or the library's abort signal."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class InvocationRecord:
    """One tool run, as stored on the message (``extra.tool_invocations[]``)."""

    id: str
    name: str
    display_name: str
    parameters: str
    args: dict[str, Any]
    result: str
    error: bool
    display_text: str
    identity: str
    round: int
    stealth: bool = False

    def to_tool_invocation(self) -> ToolInvocation:
        """The chat model's record; ``displayName``/``error``/``stealth`` ride along as the
        extra keys SillyTavern's own records carry."""
        return ToolInvocation.model_validate(
            {
                "id": self.id,
                "displayName": self.display_name,
                "name": self.name,
                "parameters": self.parameters,
                "result": self.result,
                "error": self.error,
                **({"stealth": True} if self.stealth else {}),
            }
        )


@dataclass(frozen=True, slots=True)
class ToolLoopResult:
    """How the loop ended and everything it did."""

    text: str
    invocations: tuple[InvocationRecord, ...]
    messages: list[Message]
    rounds: int
    stop_reason: Literal["text", "max_rounds", "stealth"]
    round_texts: tuple[str, ...] = field(default=())


def result_text(value: Any) -> str:
    """An action's return value as stored: a string as is, anything else as JSON (values
    JSON cannot hold are written with ``str``, so a tool never fails on its way out)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _abort_check(abort: AbortFlag | None, records: Sequence[InvocationRecord]) -> None:
    if abort is not None and abort.is_set():
        raise GenerateTaskError(
            "aborted",
            "tool loop aborted",
            details={"invocations": [r.to_tool_invocation().to_wire() for r in records]},
        )


async def _run_action(tool: FunctionTool, args: dict[str, Any], timeout: float | None) -> Any:
    # Sync actions run inline on purpose: moving plugin code to a thread would make it
    # thread-unsafe by surprise. The timeout guards what is awaited.
    assert tool.action is not None
    outcome = tool.action(args)
    if inspect.isawaitable(outcome):
        return await asyncio.wait_for(_as_coroutine(outcome), timeout)
    return outcome


async def _as_coroutine(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


async def _invoke(
    call: ToolCall,
    tool: FunctionTool | None,
    *,
    call_id: str,
    round_no: int,
    timeout: float | None,
    validate: bool,
) -> InvocationRecord:
    parameters = call.arguments_text or canonical_json(call.args)
    error = False
    if tool is None:
        result, error = f"Error: unknown tool {call.name!r}", True
    elif tool.action is None:
        result, error = f"Error: tool {call.name!r} has no handler", True
    else:
        try:
            if validate:
                validate_arguments(tool, call.args, raw_arguments=parameters)
            result = result_text(await _run_action(tool, call.args, timeout))
        except ToolCallParseError as exc:
            result, error = f"Error: {exc.message}", True
        except TimeoutError:
            result, error = f"Error: tool {call.name!r} timed out after {timeout:g} s", True
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            result, error = f"Error: {type(exc).__name__}: {exc}", True
    return InvocationRecord(
        id=call_id,
        name=call.name,
        display_name=tool.label if tool is not None else call.name,
        parameters=parameters,
        args=call.args,
        result=result,
        error=error,
        display_text=tool.message_for(call.args) if tool is not None else call.name,
        identity=call.identity,
        round=round_no,
        stealth=bool(tool is not None and tool.stealth),
    )


def _unique(calls: Sequence[ToolCall]) -> list[ToolCall]:
    seen: set[tuple[str, str]] = set()
    out = []
    for call in calls:
        key = (call.id, call.identity)
        if call.id and key in seen:
            continue
        seen.add(key)
        out.append(call)
    return out


async def execute_tool_calls(
    calls: Sequence[Any],
    tools: Sequence[FunctionTool] | Mapping[str, FunctionTool],
    *,
    round_no: int = 1,
    timeout: float | None = DEFAULT_TOOL_TIMEOUT,
    validate: bool = True,
    abort: AbortFlag | None = None,
) -> list[InvocationRecord]:
    """Run one reply's calls in order; the turn runner uses this per attempt."""
    by_name = dict(tools) if isinstance(tools, Mapping) else {t.name: t for t in tools}
    parsed = _unique([coerce_tool_call(c, i) for i, c in enumerate(calls)])
    records: list[InvocationRecord] = []
    for index, call in enumerate(parsed):
        _abort_check(abort, records)
        records.append(
            await _invoke(
                call,
                by_name.get(call.name),
                call_id=call.id or f"call_{round_no}_{index}",
                round_no=round_no,
                timeout=timeout,
                validate=validate,
            )
        )
    return records


async def run_tool_loop(
    messages: Sequence[Mapping[str, Any]],
    generate: Generate,
    tools: Sequence[FunctionTool] | Mapping[str, FunctionTool],
    *,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    timeout: float | None = DEFAULT_TOOL_TIMEOUT,
    abort: AbortFlag | None = None,
    final_generate: FinalGenerate | None = None,
    validate: bool = True,
) -> ToolLoopResult:
    """Loop ``generate`` with tool results until the model answers in text.

    When ``max_rounds`` rounds all asked for tools, ``final_generate`` (if given) produces
    the closing text with tools off, as SillyTavern's last recursion does; without it the
    last round's text stands.
    """
    if max_rounds < 1:
        raise GenerateTaskError(
            "invalid_input", "max_rounds must be at least 1", details={"field": "max_rounds"}
        )
    history = [dict(m) for m in messages]
    records: list[InvocationRecord] = []
    texts: list[str] = []
    text = ""
    for round_no in range(1, max_rounds + 1):
        _abort_check(abort, records)
        text, raw_calls = await generate(list(history))
        texts.append(text)
        if not raw_calls:
            return ToolLoopResult(text, tuple(records), history, round_no - 1, "text", tuple(texts))
        round_records = await execute_tool_calls(
            raw_calls,
            tools,
            round_no=round_no,
            timeout=timeout,
            validate=validate,
            abort=abort,
        )
        records += round_records
        visible = [r for r in round_records if not r.stealth]
        if len(visible) < len(round_records):
            # stealth results stay out of the history: hidden, and no one reads them next
            return ToolLoopResult(text, tuple(records), history, round_no, "stealth", tuple(texts))
        history.append(
            {
                "role": "assistant",
                "content": text,
                "tool_calls": [
                    {
                        "id": r.id,
                        "type": "function",
                        "function": {"name": r.name, "arguments": r.parameters},
                    }
                    for r in visible
                ],
            }
        )
        history += [{"role": "tool", "tool_call_id": r.id, "content": r.result} for r in visible]
    _abort_check(abort, records)
    if final_generate is not None:
        text = await final_generate(list(history))
        texts.append(text)
    return ToolLoopResult(text, tuple(records), history, max_rounds, "max_rounds", tuple(texts))
