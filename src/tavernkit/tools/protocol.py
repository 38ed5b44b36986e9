"""What the two prompt protocols share: instructions layout, history rewrite, parsing frame,
corrective retries.

A protocol only decides how calls are written (``render_calls``), how the payload after the
trigger is read (``parse_payload``), and its format rules and skeleton. Everything else (the
trigger split, name checks, schema validation, tool_choice lines, where the instructions go,
how earlier calls and results are rewritten into text) is here, so the two cannot drift.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from tavernkit.errors import GenerateTaskError
from tavernkit.tools._catalogue import ToolLike, render_tool_guide, tool_choice_line
from tavernkit.tools.calls import ToolCall, coerce_tool_call, openai_tool_call
from tavernkit.tools.errors import ToolCallParseError
from tavernkit.tools.identity import call_identity, canonical_json
from tavernkit.tools.scan import StreamDetector, split_at_trigger
from tavernkit.tools.validate import normalize_tool_choice, validate_calls

__all__ = ["ParsedReply", "PromptProtocol", "Resend"]

Message = dict[str, Any]
Resend = Callable[[list[Message]], Awaitable[str]]

#: how much of a failed reply the corrective message quotes back
_QUOTE_LIMIT = 2000


@dataclass(frozen=True, slots=True)
class ParsedReply:
    """A protocol reply read: the text to show, the calls, and whether the trigger came."""

    display_text: str
    calls: tuple[ToolCall, ...] = ()
    triggered: bool = False


def _fence(text: str) -> str:
    """A backtick fence longer than any run inside ``text``, so quoting cannot break out."""
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


class PromptProtocol(ABC):
    """One text protocol for tool calls, bound to a trigger line and a catalogue style."""

    mode: ClassVar[str]
    #: the format rules, the correct example and the mistakes list, written per protocol
    _format_rules: ClassVar[tuple[str, ...]]
    _mistakes: ClassVar[tuple[str, ...]]

    def __init__(self, trigger: str, *, style: str = "json_schema") -> None:
        if not trigger.strip() or "\n" in trigger:
            raise GenerateTaskError(
                "invalid_input",
                "trigger_signal must be one non-empty line",
                details={"field": "function_call_options.trigger_signal"},
            )
        self.trigger = trigger
        self.style = style

    # -- writing ---------------------------------------------------------------------------

    @abstractmethod
    def render_calls(self, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
        """The trigger line plus the payload for ``(name, args)`` calls."""

    @abstractmethod
    def parse_payload(self, payload: str) -> list[tuple[str, Any, str]]:
        """``(name, args, raw_args_text)`` per call in the text after the trigger; raises
        :class:`ToolCallParseError` with a diagnostic."""

    def skeleton(self, name: str = "TOOL_NAME") -> str:
        return self.render_calls([(name, {"arg": "value"})])

    def instructions(
        self,
        tools: Sequence[ToolLike],
        *,
        tool_choice: Any = None,
        required_function_name: str | None = None,
    ) -> str:
        """The protocol message: catalogue, context notes, format rules and an example."""
        choice = normalize_tool_choice(tool_choice)
        names = [t.name for t in tools]
        notes = [
            "- You may call several tools in one response.",
            "- Obey any later instruction that forbids, requires or restricts tool use.",
            "- The conversation may contain earlier tool results wrapped in "
            "<tool_result>...</tool_result>.",
            "- If you are asked to think or write a preamble first (for example inside "
            "<thought>), do that before the trigger line.",
        ]
        if required_function_name:
            notes.append(f"- Required function name for this response: {required_function_name}.")
        line = tool_choice_line(choice.mode, choice.name, names)
        if line:
            notes.append(f"- {line}")
        example_calls: list[tuple[str, Mapping[str, Any]]] = [
            ("FUNCTION_A", {"arg1": "value", "safe_search": "moderate"}),
            ("FUNCTION_B", {"-i": True, "arg2": 123}),
        ]
        parts = [
            "You have access to the following available tools to help solve problems:",
            render_tool_guide(tools, self.style),
            "IMPORTANT CONTEXT NOTES:\n" + "\n".join(notes),
            "FUNCTION CALL FORMAT (only when you decide to call tools):\n"
            + "\n".join(
                f"{i}. {rule.format(trigger=self.trigger)}"
                for i, rule in enumerate(self._format_rules, 1)
            ),
            "STRICT ARGUMENT KEY RULES:\n"
            '- Use argument keys exactly as defined (never turn "-i" into "i" or '
            '"safe_search" into "safeSearch").\n'
            "- Use only the exact tool names listed above.\n"
            "- Give each call one JSON object holding all of its required arguments.",
            "CORRECT EXAMPLE (two calls):\n" + self.render_calls(example_calls),
            "Now strictly follow the above specifications.",
        ]
        return "\n\n".join(p for p in parts if p.strip())

    def insert_instructions(
        self, messages: Sequence[Mapping[str, Any]], instructions: str
    ) -> list[Message]:
        """``messages`` with the protocol as a new system message after the leading run of
        system messages (where models weigh instructions most, without touching the card)."""
        out = [dict(m) for m in messages]
        at = 0
        while at < len(out) and out[at].get("role") == "system":
            at += 1
        out.insert(at, {"role": "system", "content": instructions})
        return out

    def rewrite_history(self, messages: Sequence[Mapping[str, Any]]) -> list[Message]:
        """Earlier native calls and results as this protocol's text, so a model that cannot
        read ``tool_calls``/``tool`` messages still sees the whole exchange.

        Assistant ``tool_calls`` are appended to the content (blank line between) in the
        protocol's form; each ``tool`` message becomes a user message naming the tool, its
        arguments and the result in ``<tool_result>``; a result whose call is unknown keeps
        its content. ``tool_call_id`` is dropped everywhere.
        """
        known: dict[str, tuple[str, dict[str, Any]]] = {}
        out: list[Message] = []
        for index, message in enumerate(messages):
            msg = dict(message)
            role = msg.get("role")
            raw_calls = msg.pop("tool_calls", None)
            call_id = msg.pop("tool_call_id", None)
            if role == "assistant" and raw_calls:
                calls: list[tuple[str, Mapping[str, Any]]] = []
                for n, raw in enumerate(raw_calls):
                    try:
                        call = coerce_tool_call(raw, n)
                    except GenerateTaskError as exc:
                        raise GenerateTaskError(
                            "invalid_input",
                            f"messages[{index}].tool_calls[{n}]: {exc.message}",
                            cause=exc,
                            details={"field": f"messages[{index}].tool_calls[{n}]"},
                        ) from exc
                    calls.append((call.name, call.args))
                    if call.id:
                        known[call.id] = (call.name, call.args)
                msg["content"] = self._append_text(msg.get("content"), self.render_calls(calls))
            elif role == "tool":
                msg.pop("name", None)
                msg["role"] = "user"
                found = known.get(call_id) if isinstance(call_id, str) else None
                if found is not None:
                    msg["content"] = (
                        "Tool execution result:\n"
                        f"- Tool name: {found[0]}\n"
                        f"- Tool arguments: {canonical_json(found[1])}\n"
                        "- Execution result:\n"
                        f"<tool_result>\n{self._text_of(msg.get('content'))}\n</tool_result>"
                    )
            out.append(msg)
        return out

    @staticmethod
    def _text_of(content: Any) -> str:
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        return "" if content is None else json.dumps(content, ensure_ascii=False)

    @staticmethod
    def _append_text(content: Any, block: str) -> Any:
        if isinstance(content, list):
            return [*content, {"type": "text", "text": block}]
        text = content if isinstance(content, str) else ""
        return f"{text}\n\n{block}" if text.strip() else block

    # -- reading ---------------------------------------------------------------------------

    def detector(self) -> StreamDetector:
        return StreamDetector(self.trigger)

    def parse(
        self,
        text: str,
        tools: Sequence[ToolLike],
        *,
        mandatory: bool = False,
        validate: bool = True,
    ) -> ParsedReply:
        """Read a whole reply.

        No trigger: plain text, unless a call is ``mandatory`` (``missing_trigger``). After
        the trigger the payload must parse, name only known tools and (with ``validate``)
        match their schemas; each failure is a :class:`ToolCallParseError` whose message is
        fit to quote in a corrective retry.
        """
        visible, payload = split_at_trigger(text, self.trigger)
        if payload is None:
            if mandatory:
                hint = (
                    " (a function-call payload was written without it)"
                    if (self._looks_like_payload(text))
                    else ""
                )
                raise ToolCallParseError(
                    "missing_trigger",
                    f"the reply did not include the required trigger line {self.trigger}{hint}",
                    raw_text=text,
                )
            return ParsedReply(display_text=text, calls=(), triggered=False)
        try:
            parsed = self.parse_payload(payload)
        except ToolCallParseError as exc:
            exc.details.setdefault("raw_text", text)
            exc.raw_text = text
            raise
        if not parsed:
            raise ToolCallParseError(
                "no_calls", "no function call after the trigger line", raw_text=text
            )
        calls = []
        for index, (name, args, raw_args) in enumerate(parsed):
            ident = call_identity(name, args)
            call_id = f"call_{index}_{ident[:16]}"
            calls.append(
                ToolCall(
                    name=name,
                    args=args,
                    raw=openai_tool_call(call_id, name, args),
                    id=call_id,
                    arguments_text=raw_args,
                )
            )
        names = {t.name for t in tools}
        for index, call in enumerate(calls):
            if call.name not in names:
                raise ToolCallParseError(
                    "unknown_function",
                    f"tool call #{index + 1} names unknown function {call.name!r}; "
                    "available: " + (", ".join(sorted(names)) or "(none)"),
                    name=call.name,
                    raw_arguments=call.arguments_text,
                    raw_text=text,
                )
        if validate:
            try:
                validate_calls(calls, tools)
            except ToolCallParseError as exc:
                exc.details.setdefault("raw_text", text)
                exc.raw_text = text
                raise
        return ParsedReply(display_text=visible.rstrip(), calls=tuple(calls), triggered=True)

    def _looks_like_payload(self, text: str) -> bool:
        return False

    def corrective_message(
        self,
        error: GenerateTaskError,
        previous_text: str,
        *,
        required_function_name: str | None = None,
    ) -> str:
        """The user message for a retry after a malformed reply: what failed, the reply
        quoted back (bounded), the mistakes to avoid, and the exact skeleton."""
        quoted = previous_text[:_QUOTE_LIMIT]
        if len(previous_text) > _QUOTE_LIMIT:
            quoted += "\n[...truncated]"
        fence = _fence(quoted)
        lines = [
            "Your previous response attempted function calling but failed parsing/validation.",
            f"Error details: {error.message}",
            "Previous response:",
            f"{fence}text\n{quoted}\n{fence}",
            "Retry now with strictly valid output only.",
            "Common invalid patterns to avoid:",
            *(f"- {m}" for m in self._mistakes),
            f"First line must be exactly: {self.trigger}",
            self._format_rules[1].format(trigger=self.trigger),
            "Correct skeleton:",
            self.skeleton(required_function_name or "TOOL_NAME"),
        ]
        if required_function_name:
            lines.append(f"Required function name: {required_function_name}.")
        lines.append("Do not output any extra prose after the function payload.")
        return "\n".join(lines)

    async def parse_with_retries(
        self,
        text: str,
        tools: Sequence[ToolLike],
        messages: Sequence[Mapping[str, Any]],
        resend: Resend,
        *,
        mandatory: bool = False,
        required_function_name: str | None = None,
        max_retries: int = 2,
    ) -> ParsedReply:
        """Parse, and on failure re-ask at most ``max_retries`` times with a corrective
        message (previous reply as assistant, correction as user).

        A reply without the trigger is plain text unless a call is mandatory. When a retry's
        request itself fails (other than an abort), retrying stops and the last parse error
        is raised with ``details["retry_error"]``.
        """
        history = [dict(m) for m in messages]
        attempt = 0
        while True:
            try:
                return self.parse(text, tools, mandatory=mandatory)
            except ToolCallParseError as exc:
                if attempt >= max_retries:
                    exc.details["attempts"] = attempt + 1
                    raise
                history += [
                    {"role": "assistant", "content": text},
                    {
                        "role": "user",
                        "content": self.corrective_message(
                            exc, text, required_function_name=required_function_name
                        ),
                    },
                ]
                attempt += 1
                try:
                    text = await resend(list(history))
                except GenerateTaskError as retry_exc:
                    if retry_exc.code == "aborted":
                        raise
                    exc.details["retry_error"] = retry_exc.message
                    raise exc from retry_exc
                except Exception as retry_exc:
                    exc.details["retry_error"] = repr(retry_exc)
                    raise exc from retry_exc
