"""Fold stream events into one :class:`Completion`.

Used by both paths: a stream feeds events as they arrive, a JSON body feeds the events its
adapter produced. Rules that the wire corpus forced on us:

- tool calls are keyed by their ``index`` (a proxy may start at 1); ``id`` and ``name`` are set
  from the first non-empty value (Mistral repeats ``"name": ""``, some servers repeat the whole
  name); only argument fragments are concatenated; a missing id is synthesized;
- a finish reason is only ever replaced by another real one (adapters drop ``null``), and a
  ``stop`` with tool calls present is reported as ``tool_calls`` (Gemini finishes tool calls
  with ``STOP``);
- usage fields are replaced by later reports (providers send cumulative counts);
- every choice (``n > 1``) is accumulated on its own; choice 0 is the completion, the others
  are :attr:`Completion.alternatives`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import jiter

from tavernkit.errors import ProviderError, StreamInterrupted
from tavernkit.providers.events import (
    Finish,
    FinishReason,
    ProviderErrorEvent,
    ReasoningDelta,
    RefusalDelta,
    ResponseMeta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
)

__all__ = ["Accumulator", "Completion", "ReasoningBlock", "WireToolCall", "parse_partial_json"]


def parse_partial_json(text: str) -> Any:
    """The best reading of an incomplete JSON document (for live display of tool arguments);
    ``None`` when nothing can be read yet."""
    if not text.strip():
        return None
    try:
        return jiter.from_json(text.encode(), partial_mode="trailing-strings")
    except ValueError:
        return None


@dataclass(slots=True)
class WireToolCall:
    """One complete (or truncated) tool call."""

    index: int
    id: str
    name: str
    arguments: str
    signature: str | None = None
    #: True when the stream stopped (``length``) before the arguments were valid JSON.
    truncated: bool = False

    def parsed_arguments(self) -> Any:
        """The arguments as JSON; ``None`` when they are not valid (truncated or malformed)."""
        try:
            return jiter.from_json(self.arguments.encode())
        except ValueError:
            return None


@dataclass(slots=True)
class ReasoningBlock:
    """One reasoning block: visible text, or a redacted payload; signatures go back verbatim."""

    text: str = ""
    signature: str | None = None
    redacted: bool = False
    data: str | None = None
    key: int | str | None = None
    format: str | None = None


@dataclass(slots=True)
class Completion:
    """The accumulated result of one request."""

    text: str = ""
    reasoning: str = ""
    reasoning_blocks: list[ReasoningBlock] = field(default_factory=list)
    refusal: str = ""
    tool_calls: list[WireToolCall] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: FinishReason | None = None
    raw_finish_reason: str | None = None
    response_id: str | None = None
    model: str | None = None
    error: ProviderError | None = None
    alternatives: list[Completion] = field(default_factory=list)

    def raise_for_error(self) -> Completion:
        """Raise the error the response carried, if any; else return ``self``."""
        if self.error is not None:
            raise self.error
        return self

    @property
    def raw(self) -> dict[str, Any]:
        """Provider details that are not part of the normalized result."""
        return {
            "id": self.response_id,
            "model": self.model,
            "finish_reason": self.raw_finish_reason,
            "usage": dict(self.usage.raw) if self.usage and self.usage.raw else None,
        }


class _ToolState:
    __slots__ = ("args", "id", "name", "signature")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.args: list[str] = []
        self.signature: str | None = None


class _ChoiceState:
    __slots__ = ("blocks", "finish", "raw_finish", "refusal", "text", "tools")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.blocks: list[ReasoningBlock] = []
        self.tools: dict[int, _ToolState] = {}
        self.finish: FinishReason | None = None
        self.raw_finish: str | None = None


def _default_tool_id(index: int) -> str:
    return f"call_{index}"


class Accumulator:
    """Feed events in order; read :meth:`result` at any time (a live snapshot is valid too)."""

    def __init__(self, *, tool_id_factory: Callable[[int], str] = _default_tool_id) -> None:
        self._choices: dict[int, _ChoiceState] = {0: _ChoiceState()}
        self._usage: Usage | None = None
        self._meta_id: str | None = None
        self._meta_model: str | None = None
        self._error: ProviderError | None = None
        self._tool_id_factory = tool_id_factory

    def _choice(self, index: int) -> _ChoiceState:
        state = self._choices.get(index)
        if state is None:
            state = self._choices[index] = _ChoiceState()
        return state

    def feed_all(self, events: Iterable[StreamEvent]) -> Accumulator:
        for event in events:
            self.feed(event)
        return self

    def feed(self, event: StreamEvent) -> None:
        # Ordered by frequency: text deltas dominate every stream.
        if type(event) is TextDelta:
            if event.text:
                self._choice(event.choice).text.append(event.text)
        elif type(event) is ReasoningDelta:
            self._reasoning(event)
        elif type(event) is ToolCallDelta:
            self._tool(event)
        elif type(event) is Usage:
            self._usage = _merge_usage(self._usage, event)
        elif type(event) is Finish:
            state = self._choice(event.choice)
            state.finish = event.reason
            state.raw_finish = event.raw_reason
        elif type(event) is RefusalDelta:
            if event.text:
                self._choice(event.choice).refusal.append(event.text)
        elif type(event) is ResponseMeta:
            self._meta_id = self._meta_id or event.id or None
            self._meta_model = self._meta_model or event.model or None
        elif type(event) is ProviderErrorEvent:
            self._error = event.error

    def _reasoning(self, event: ReasoningDelta) -> None:
        blocks = self._choice(event.choice).blocks
        current = blocks[-1] if blocks else None
        starts_new = (
            current is None
            or event.redacted
            or current.redacted
            or (event.block is not None and event.block != current.key)
            or (current.signature is not None and event.text != "")
        )
        if starts_new:
            current = ReasoningBlock(key=event.block, format=event.format)
            blocks.append(current)
        assert current is not None
        if event.text:
            current.text += event.text
        if event.signature:
            current.signature = (current.signature or "") + event.signature
        if event.redacted:
            current.redacted = True
        if event.data:
            current.data = (current.data or "") + event.data
        if event.format and not current.format:
            current.format = event.format

    def _tool(self, event: ToolCallDelta) -> None:
        tools = self._choice(event.choice).tools
        state = tools.get(event.index)
        if state is None:
            state = tools[event.index] = _ToolState()
        if event.id and not state.id:
            state.id = event.id
        if event.name and not state.name:
            state.name = event.name
        if event.arguments_fragment:
            state.args.append(event.arguments_fragment)
        if event.signature and not state.signature:
            state.signature = event.signature

    def partial_arguments(self, index: int, choice: int = 0) -> Any:
        """The tool call's arguments so far, parsed leniently for live display."""
        state = self._choice(choice).tools.get(index)
        return parse_partial_json("".join(state.args)) if state else None

    @property
    def text(self) -> str:
        return "".join(self._choices[0].text)

    def result(self) -> Completion:
        first = self._completion(self._choices[0])
        first.alternatives = [
            self._completion(state) for index, state in sorted(self._choices.items()) if index
        ]
        return first

    def _completion(self, state: _ChoiceState) -> Completion:
        text = "".join(state.text)
        calls: list[WireToolCall] = []
        for index, tool in state.tools.items():
            args = "".join(tool.args)
            call = WireToolCall(
                index=index,
                id=tool.id or self._tool_id_factory(index),
                name=tool.name or "",
                arguments=args if args.strip() else "{}",
                signature=tool.signature,
            )
            if args.strip() and call.parsed_arguments() is None and state.finish == "length":
                call.truncated = True
            calls.append(call)
        finish = state.finish
        if finish == "stop" and calls:
            finish = "tool_calls"
        error = self._error
        if isinstance(error, StreamInterrupted) and not error.delivered_text:
            error.delivered_text = text
        return Completion(
            text=text,
            reasoning="\n\n".join(b.text for b in state.blocks if b.text),
            reasoning_blocks=[replace(b) for b in state.blocks],
            refusal="".join(state.refusal),
            tool_calls=calls,
            usage=self._usage,
            finish_reason=finish,
            raw_finish_reason=state.raw_finish,
            response_id=self._meta_id,
            model=self._meta_model,
            error=error,
        )


def _merge_usage(old: Usage | None, new: Usage) -> Usage:
    if old is None:
        return new
    return Usage(
        input_tokens=new.input_tokens if new.input_tokens is not None else old.input_tokens,
        output_tokens=new.output_tokens if new.output_tokens is not None else old.output_tokens,
        total_tokens=new.total_tokens if new.total_tokens is not None else old.total_tokens,
        cached_input_tokens=(
            new.cached_input_tokens
            if new.cached_input_tokens is not None
            else old.cached_input_tokens
        ),
        cache_write_tokens=(
            new.cache_write_tokens if new.cache_write_tokens is not None else old.cache_write_tokens
        ),
        reasoning_tokens=(
            new.reasoning_tokens if new.reasoning_tokens is not None else old.reasoning_tokens
        ),
        raw={**(old.raw or {}), **(new.raw or {})} if (old.raw or new.raw) else None,
    )
