"""The adapter contract: a ``PromptRequest`` out as HTTP, bytes back as events.

An :class:`Adapter` knows one wire API and nothing about hosts or keys (that is
:class:`~tavernkit.providers.provider.Provider`) or model capabilities (that is
:class:`~tavernkit.providers.profiles.ModelProfile`). It has four jobs:

- :meth:`Adapter.build_request`: the method, path and JSON body for a request;
- :meth:`Adapter.parse_response`: a non-streaming body to events;
- :meth:`Adapter.stream_parser`: a stateful parser turning SSE events to stream events, which
  reports a stream that ended before its terminator as ``StreamInterrupted``;
- :meth:`Adapter.classify_error`: its own table from (status, body, headers) to the semantic
  error classes.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from tavernkit.errors import ProtocolError, ProviderError, StreamInterrupted
from tavernkit.providers.events import ProviderErrorEvent, StreamEvent
from tavernkit.providers.sse import SSEEvent

if TYPE_CHECKING:
    from tavernkit.providers.profiles import ModelProfile
    from tavernkit.providers.request import PromptRequest

__all__ = [
    "Adapter",
    "ErrorContext",
    "StreamParser",
    "WireRequest",
    "interrupted",
    "load_json",
]


@dataclass(frozen=True, slots=True)
class WireRequest:
    """An HTTP request an adapter wants sent (auth is the provider's business).

    ``downgrades`` lists what the adapter had to change because the model cannot take it
    (an image replaced by a placeholder): reported, never silent.
    """

    method: str
    path: str
    body: dict[str, Any]
    stream: bool = False
    params: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    downgrades: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ErrorContext:
    """Who is talking, for error messages; ``secrets`` are scrubbed from every error body."""

    provider: str | None = None
    model: str | None = None
    secrets: tuple[str, ...] = ()


def load_json(data: str | bytes, ctx: ErrorContext, what: str = "response") -> Any:
    """Parse JSON from a provider, or raise a :class:`ProtocolError` that says which part."""
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(
            f"{what} is not valid JSON ({exc})", provider=ctx.provider, model=ctx.model
        ) from None


def interrupted(ctx: ErrorContext, why: str) -> ProviderErrorEvent:
    """The event for a stream that ended before its terminator (text so far is filled in by
    the accumulator)."""
    return ProviderErrorEvent(
        StreamInterrupted(f"stream ended early: {why}", provider=ctx.provider, model=ctx.model)
    )


class StreamParser(ABC):
    """Turns one stream's SSE events into stream events; one instance per response."""

    def __init__(self, ctx: ErrorContext) -> None:
        self.ctx = ctx
        #: the stream reached its terminator (or an in-stream error ended it)
        self.done = False

    @abstractmethod
    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        """Events for one SSE event."""

    def finish(self) -> list[StreamEvent]:
        """Events at EOF: a ``StreamInterrupted`` error when the terminator never came."""
        return [] if self.done else [interrupted(self.ctx, "no terminator")]


class Adapter(ABC):
    """One wire API; stateless, so one instance serves every request."""

    #: a short name used in logs and the plugin registry
    name: ClassVar[str] = "adapter"

    @abstractmethod
    def build_request(
        self,
        request: PromptRequest,
        *,
        model: str | None,
        stream: bool,
        profile: ModelProfile | None = None,
    ) -> WireRequest:
        """The HTTP request for ``request``."""

    @abstractmethod
    def parse_response(self, body: bytes, ctx: ErrorContext) -> list[StreamEvent]:
        """Events for a complete (non-streaming) 200 body."""

    @abstractmethod
    def stream_parser(self, ctx: ErrorContext) -> StreamParser:
        """A fresh parser for one streamed response."""

    @abstractmethod
    def classify_error(
        self, status: int, body: bytes, headers: Mapping[str, str], ctx: ErrorContext
    ) -> ProviderError:
        """The semantic error for a non-2xx response."""
