"""Where a turn's output goes: the :class:`ResponseSink` protocol and two sinks.

"Delivered" means emitted to the sink: the runner emits only text it is prepared to stand by
(whole clauses while streaming, everything on success), so what a sink received is exactly
what the next attempt continues from. ``flush()`` asks the sink to make everything emitted so
far visible (or durable); ``finalize(result)`` ends the turn; ``cleanup()`` always runs, and
an error in it never hides the turn's own error.

The store sink comes with the chat service and the SSE sink with the server; this module has
the CLI sink (a rich console) and :class:`RecordingSink` for tests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from rich.console import Console

from tavernkit.generation.result import FallbackNotice, TurnError, TurnResult
from tavernkit.providers.events import ReasoningDelta, TextDelta

__all__ = [
    "ConsoleSink",
    "ErrorEvent",
    "NoticeEvent",
    "RecordingSink",
    "ResponseSink",
    "SinkEvent",
    "ToolEvent",
]


@dataclass(frozen=True, slots=True)
class NoticeEvent:
    """A fallback model answered; the notice lists failures by class and safe code only."""

    notice: FallbackNotice


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    """The turn's terminal error (the only error a user sees when every attempt failed)."""

    error: TurnError


@dataclass(frozen=True, slots=True)
class ToolEvent:
    """A tool ran (or its recorded result was reused); ``display`` is the text to show."""

    name: str
    display: str
    replayed: bool = False
    error: bool = False


SinkEvent = TextDelta | ReasoningDelta | NoticeEvent | ErrorEvent | ToolEvent


@runtime_checkable
class ResponseSink(Protocol):
    """Where a turn's events go. A sink whose ``emit`` can never block may also offer a
    synchronous ``emit_nowait(event)`` (optional, not part of this protocol's required
    surface); delivery then calls that in place instead of queueing."""

    async def emit(self, event: SinkEvent) -> None: ...

    async def flush(self) -> None: ...

    async def finalize(self, result: TurnResult) -> None: ...

    async def cleanup(self) -> None: ...


@dataclass
class RecordingSink:
    """Keeps everything it is given, for tests. ``before_emit`` (awaited before each event is
    recorded) lets a test make delivery slow; ``cleanup_error`` makes cleanup fail."""

    events: list[SinkEvent] = field(default_factory=list)
    flushes: int = 0
    finalized: list[TurnResult] = field(default_factory=list)
    cleaned: int = 0
    before_emit: Callable[[SinkEvent], Awaitable[None]] | None = None
    cleanup_error: BaseException | None = None

    async def emit(self, event: SinkEvent) -> None:
        if self.before_emit is not None:
            await self.before_emit(event)
        self.events.append(event)

    @property
    def emit_nowait(self) -> Callable[[SinkEvent], None] | None:
        """In place when nothing slows delivery down; queued (``None``) with ``before_emit``."""
        return None if self.before_emit is not None else self.events.append

    async def flush(self) -> None:
        self.flushes += 1

    async def finalize(self, result: TurnResult) -> None:
        self.finalized.append(result)

    async def cleanup(self) -> None:
        self.cleaned += 1
        if self.cleanup_error is not None:
            raise self.cleanup_error

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TextDelta))

    @property
    def errors(self) -> list[TurnError]:
        return [e.error for e in self.events if isinstance(e, ErrorEvent)]

    @property
    def notices(self) -> list[FallbackNotice]:
        return [e.notice for e in self.events if isinstance(e, NoticeEvent)]


class ConsoleSink:
    """Prints a turn to a terminal: the reply as it arrives, reasoning dimmed (when asked),
    tool runs and notices on their own lines, errors in red."""

    def __init__(self, console: Console | None = None, *, show_reasoning: bool = False) -> None:
        self.console = console or Console()
        self.show_reasoning = show_reasoning
        self._mid_line = False

    def _newline(self) -> None:
        if self._mid_line:
            self.console.print()
            self._mid_line = False

    async def emit(self, event: SinkEvent) -> None:
        if isinstance(event, TextDelta):
            self.console.print(event.text, end="", markup=False, highlight=False, soft_wrap=True)
            self._mid_line = not event.text.endswith("\n")
        elif isinstance(event, ReasoningDelta):
            if self.show_reasoning and event.text:
                self.console.print(
                    event.text, end="", style="dim italic", markup=False, highlight=False
                )
                self._mid_line = True
        elif isinstance(event, ToolEvent):
            self._newline()
            mark = " (reused)" if event.replayed else ""
            self.console.print(f"[tool] {event.display}{mark}", style="cyan", markup=False)
        elif isinstance(event, NoticeEvent):
            self._newline()
            self.console.print(event.notice.text(), style="yellow", markup=False)
        else:
            self._newline()
            self.console.print(event.error.text(), style="bold red", markup=False)

    async def flush(self) -> None:
        self.console.file.flush()

    async def finalize(self, result: TurnResult) -> None:
        self._newline()
        self.console.file.flush()

    async def cleanup(self) -> None:
        self._mid_line = False
