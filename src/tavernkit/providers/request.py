"""What a turn asks a model for, independent of any wire API.

``PromptRequest`` is :class:`ChatPrompt` (a message list, for chat APIs) or :class:`TextPrompt`
(one folded prompt string, for the text-completion family). The prompt engines build these and
the adapters read them; they live here, low in the house, so adapters never import ``prompt/``
and the engines never import an adapter.

Unset is ``None`` everywhere: an adapter writes a sampler field only when it was set, so a
backend that rejects a parameter never receives it by accident.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from tavernkit.providers.accumulator import ReasoningBlock, WireToolCall

__all__ = [
    "ChatMessage",
    "ChatPrompt",
    "ContentPart",
    "MessageLabel",
    "PromptRequest",
    "ResponseFormat",
    "Role",
    "Sampling",
    "TextPrompt",
    "ToolChoice",
    "ToolSpec",
    "WireImagePart",
    "WireTextPart",
]

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class WireTextPart:
    text: str


@dataclass(frozen=True, slots=True)
class WireImagePart:
    """An image: a URL (``https:`` or ``data:``) or raw base64 ``data`` with its MIME type."""

    url: str | None = None
    data: str | None = None
    mime_type: str = "image/png"
    detail: str | None = None

    def data_url(self) -> str:
        if self.url:
            return self.url
        return f"data:{self.mime_type};base64,{self.data or ''}"

    def base64(self) -> tuple[str, str] | None:
        """``(mime_type, base64 data)`` when the image is inline, else ``None``."""
        if self.data is not None:
            return self.mime_type, self.data
        if self.url and self.url.startswith("data:") and ";base64," in self.url:
            head, _, payload = self.url.partition(";base64,")
            return head[5:] or self.mime_type, payload
        return None


ContentPart = WireTextPart | WireImagePart


class MessageLabel(NamedTuple):
    """Where one message of a chat request came from, as the prompt builder labelled it.

    ``kind`` is the builder's block source (``preset``, ``history``, ``example``,
    ``injection``, ``extension``, ``control``, ``tool``): each attempt reads it to re-trim for
    its own window (only ``history`` and ``tool`` messages may be dropped, so world-info depth
    injections and an in-chat author's note stay), and ``tool_only`` to leave out earlier
    tool calls and results for a model without tools. ``identifier`` / ``message_index`` /
    ``entries`` / ``tokens`` are what the prompt inspector shows. A named tuple: one is made
    per message of every turn, and a tuple is made several times faster than a frozen
    dataclass.
    """

    kind: str
    identifier: str = ""
    message_index: int | None = None
    tool_only: bool = False
    entries: tuple[str, ...] = ()
    tokens: int = 0

    @property
    def trimmable(self) -> bool:
        """History (chat messages and their tool exchanges) is what a window may drop."""
        return self.kind in ("history", "tool")


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message. ``content`` is text or parts (text and images).

    ``reasoning_blocks`` / ``tool_calls`` are an earlier assistant turn's, sent back so that
    signatures (Claude thinking, Gemini thought signatures, OpenRouter details) round-trip.
    ``cache`` marks the last message of the stable prefix (Anthropic ``cache_control``).
    ``label`` is the prompt builder's provenance (``None`` for a message built elsewhere: a
    hook's addition, a task's own message); it is not part of the message's value, so two
    messages with the same content compare equal whatever their provenance.
    """

    role: Role
    content: str | tuple[ContentPart, ...] = ""
    name: str | None = None
    tool_calls: tuple[WireToolCall, ...] = ()
    tool_call_id: str | None = None
    reasoning_blocks: tuple[ReasoningBlock, ...] = ()
    cache: bool = False
    label: MessageLabel | None = field(default=None, compare=False)

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content if isinstance(p, WireTextPart))

    def has_images(self) -> bool:
        return not isinstance(self.content, str) and any(
            isinstance(p, WireImagePart) for p in self.content
        )


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A function tool: name, description and a JSON-schema for its arguments."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    strict: bool | None = None


ToolChoice = Literal["auto", "none", "required"] | str


@dataclass(frozen=True, slots=True)
class ResponseFormat:
    """Structured output: a JSON schema the reply must satisfy (``schema=None``: any JSON)."""

    schema: Mapping[str, Any] | None = None
    name: str = "response"
    strict: bool = True


@dataclass(frozen=True, slots=True)
class Sampling:
    """Sampler settings under neutral names; ``None`` = not sent.

    ``backend`` carries a backend's own knobs under its own names (SillyTavern's
    text-generation settings such as ``dry_multiplier`` or ``xtc_threshold``, KoboldAI's
    ``rep_pen_slope``); the adapter of that backend reads them. ``extra_body`` is merged into
    the request body last, verbatim (SillyTavern's "include body" for custom endpoints).
    """

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    top_a: float | None = None
    min_p: float | None = None
    typical_p: float | None = None
    tfs: float | None = None
    repetition_penalty: float | None = None
    repetition_penalty_range: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    seed: int | None = None
    n: int | None = None
    logit_bias: Mapping[str, float] | None = None
    #: the context size the backend should assume (text backends truncate to it)
    context_size: int | None = None
    backend: Mapping[str, Any] = field(default_factory=dict)
    extra_body: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChatPrompt:
    """A chat request: messages plus everything that shapes the reply."""

    messages: tuple[ChatMessage, ...]
    sampling: Sampling = field(default_factory=Sampling)
    stop: tuple[str, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice | None = None
    response_format: ResponseFormat | None = None
    #: ask for reasoning (effort for OpenAI-style APIs, a budget for Claude/Gemini)
    reasoning_effort: str | None = None
    reasoning_budget: int | None = None


@dataclass(frozen=True, slots=True)
class TextPrompt:
    """A text-completion request: one folded prompt string (instruct/context already applied)."""

    prompt: str
    sampling: Sampling = field(default_factory=Sampling)
    stop: tuple[str, ...] = ()
    response_format: ResponseFormat | None = None
    #: a raw grammar (GBNF) for backends that accept one
    grammar: str | None = None
    #: the prompt builder's labelled pieces, ``(kind, text)``, joining to ``prompt`` exactly
    #: (``history`` ones may be re-trimmed per attempt); ``()``: one fixed prompt. Provenance,
    #: not part of the request's value.
    pieces: tuple[tuple[str, str], ...] = field(default=(), compare=False)


PromptRequest = ChatPrompt | TextPrompt
