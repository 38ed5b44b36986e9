"""The one currency between wire adapters and everything above them.

Every adapter turns its provider's JSON (one response body or a stream of SSE payloads) into a
flat sequence of these events; :class:`~tavernkit.providers.accumulator.Accumulator` folds them
into a :class:`~tavernkit.providers.accumulator.Completion`. The non-streaming path feeds the
events of one body through the same accumulator, so the two paths cannot drift apart.

The events are small frozen slotted dataclasses rather than pydantic models: a long reply is
thousands of them and the per-event budget is a few microseconds.

``choice`` is the candidate index (OpenAI ``n > 1``); everything else is choice 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tavernkit.errors import ProviderError

__all__ = [
    "Finish",
    "FinishReason",
    "ProviderErrorEvent",
    "ReasoningDelta",
    "RefusalDelta",
    "ResponseMeta",
    "StreamEvent",
    "TextDelta",
    "ToolCallDelta",
    "Usage",
]

#: The unified finish reasons. ``raw_reason`` on :class:`Finish` keeps the provider's own word.
#: ``pause`` is Anthropic's ``pause_turn`` (continue the same turn); ``aborted`` is a caller
#: cancellation, so partial text is kept and nobody mistakes it for a model decision.
FinishReason = Literal[
    "stop",
    "length",
    "tool_calls",
    "content_filter",
    "refusal",
    "error",
    "pause",
    "aborted",
    "other",
]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the visible reply."""

    text: str
    choice: int = 0


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's reasoning, or the data that closes a reasoning block.

    ``block`` groups deltas into blocks (Anthropic content-block index, OpenRouter detail
    index): a new key starts a new block, ``None`` continues the current one. ``signature``
    (Claude thinking, Gemini thought signature, OpenRouter detail signature) and redacted
    ``data`` must be sent back verbatim on the next turn; ``format`` is OpenRouter's
    ``reasoning_details`` format so they can be rebuilt as the provider wrote them.
    """

    text: str = ""
    signature: str | None = None
    redacted: bool = False
    data: str | None = None
    block: int | str | None = None
    format: str | None = None
    choice: int = 0


@dataclass(frozen=True, slots=True)
class RefusalDelta:
    """A piece of a structured-output refusal (OpenAI ``delta.refusal``)."""

    text: str
    choice: int = 0


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of a tool call, keyed by ``index`` (never by list position: a proxy may start
    at index 1). ``id`` and ``name`` are set once from the first non-empty value; only
    ``arguments_fragment`` is concatenated."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments_fragment: str = ""
    signature: str | None = None
    choice: int = 0


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts. A later event replaces the fields it carries (providers report cumulative
    counts); ``None`` means "not reported", never zero."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cached_input_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    raw: Mapping[str, Any] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Finish:
    """Why the model stopped: the unified ``reason`` and the provider's ``raw_reason``."""

    reason: FinishReason
    raw_reason: str | None = None
    choice: int = 0


@dataclass(frozen=True, slots=True)
class ResponseMeta:
    """The response id and the model that really answered (routers pick one)."""

    id: str | None = None
    model: str | None = None


@dataclass(frozen=True, slots=True)
class ProviderErrorEvent:
    """A classified failure reported inside an otherwise successful (HTTP 200) response, or a
    stream that ended before its terminator. It is the last event of a stream."""

    error: ProviderError


StreamEvent = (
    TextDelta
    | ReasoningDelta
    | RefusalDelta
    | ToolCallDelta
    | Usage
    | Finish
    | ResponseMeta
    | ProviderErrorEvent
)
