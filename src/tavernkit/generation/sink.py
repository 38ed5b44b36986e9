"""Where a turn's output goes: the :class:`ResponseSink` protocol and two sinks.

"Delivered" means emitted to the sink: text is emitted as it arrives, and what a failed
attempt does not stand by (its unfinished clause) is taken back with a :class:`WithdrawEvent`
before the next attempt continues, so what a sink holds (its texts less its withdrawals) is
exactly what the next attempt continues from. ``flush()`` asks the sink to make everything
emitted so far visible (or durable); ``finalize(result)`` ends the turn; ``cleanup()`` always
runs, and an error in it never hides the turn's own error.

The store sink comes with the chat service and the SSE sink with the server; this module has
the CLI sink (a rich console) and :class:`RecordingSink` for tests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from rich.cells import cell_len
from rich.console import Console

from tavernkit.generation.continuation import ClauseBuffer
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
    "WithdrawEvent",
    "without_tail",
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


@dataclass(frozen=True, slots=True)
class WithdrawEvent:
    """The last ``len(text)`` characters of the reply shown so far are taken back (``text`` is
    exactly them). Text is shown as it arrives; when an attempt fails and another continues
    it, the failed attempt's unfinished clause is taken back here and the continuation writes
    it again, so it is shown once (also a start that turned out to be the user's)."""

    text: str


def without_tail(shown: str, tail: str) -> str:
    """``shown`` less a withdrawn ``tail`` (its last ``len(tail)`` characters)."""
    return shown[: max(len(shown) - len(tail), 0)]


SinkEvent = TextDelta | ReasoningDelta | NoticeEvent | ErrorEvent | ToolEvent | WithdrawEvent


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
        """The reply as the user sees it now (withdrawn tails taken back)."""
        shown = ""
        for event in self.events:
            if isinstance(event, TextDelta):
                shown += event.text
            elif isinstance(event, WithdrawEvent):
                shown = without_tail(shown, event.text)
        return shown

    @property
    def withdrawn(self) -> list[str]:
        return [e.text for e in self.events if isinstance(e, WithdrawEvent)]

    @property
    def errors(self) -> list[TurnError]:
        return [e.error for e in self.events if isinstance(e, ErrorEvent)]

    @property
    def notices(self) -> list[FallbackNotice]:
        return [e.notice for e in self.events if isinstance(e, NoticeEvent)]


class ConsoleSink:
    """Prints a turn to a terminal: the reply as it arrives, reasoning dimmed (when asked),
    tool runs and notices on their own lines, errors in red.

    A withdrawal erases the end of the reply on a terminal (the cursor goes back over it,
    wrapped rows included, and the screen is cleared from there). Output that cannot be
    taken back (a pipe, a file) holds the unfinished clause instead, as the engine did before
    it showed text as it arrived, and prints it at the next clause, notice or flush.
    """

    def __init__(self, console: Console | None = None, *, show_reasoning: bool = False) -> None:
        self.console = console or Console()
        self.show_reasoning = show_reasoning
        self._mid_line = False
        #: the reply printed since the last line that was not reply text, and the column
        #: it started at (a speaker's name before it)
        self._reply = ""
        self._start_col = 0
        self._held = ClauseBuffer()

    def _newline(self) -> None:
        self._print_held()
        if self._mid_line:
            self.console.print()
            self._mid_line = False
        self._reply = ""
        self._start_col = 0

    def _print_text(self, text: str) -> None:
        if not text:
            return
        self.console.print(text, end="", markup=False, highlight=False, soft_wrap=True)
        self._mid_line = not text.endswith("\n")
        self._reply += text

    def _print_held(self) -> None:
        self._print_text(self._held.take())

    def _show(self, text: str) -> None:
        self._print_text(text if self.console.is_terminal else self._held.push(text))

    def _withdraw(self, tail: str) -> None:
        if not self.console.is_terminal:
            # only the held clause can be taken back here (the engine withdraws no more)
            self._held.drop_tail(len(tail))
            return
        keep = without_tail(self._reply, tail)
        row, _ = self._cursor(self._reply)
        to_row, to_col = self._cursor(keep, next_char=True)
        up = f"\x1b[{row - to_row}A" if row > to_row else ""
        right = f"\x1b[{to_col}C" if to_col else ""
        self.console.file.write(f"{up}\r{right}\x1b[J")
        self._reply = keep
        self._mid_line = bool(keep) and not keep.endswith("\n")

    def _cursor(self, text: str, *, next_char: bool = False) -> tuple[int, int]:
        """The row (from the reply's first) and column the cursor is at after ``text``
        (``next_char``: where the next character goes, past a full row's pending wrap)."""
        width = max(self.console.width, 1)
        row, col = 0, self._start_col
        for n, line in enumerate(text.split("\n")):
            if n:
                row, col = row + 1, 0
            cells = col + cell_len(line)
            wraps = (cells - 1) // width if cells else 0
            row, col = row + wraps, cells - wraps * width
        if next_char and col >= width:  # the terminal wraps before the next character
            row, col = row + 1, 0
        return row, col

    async def emit(self, event: SinkEvent) -> None:
        if isinstance(event, TextDelta):
            self._show(event.text)
        elif isinstance(event, WithdrawEvent):
            self._withdraw(event.text)
        elif isinstance(event, ReasoningDelta):
            if self.show_reasoning and event.text:
                self._print_held()
                self.console.print(
                    event.text, end="", style="dim italic", markup=False, highlight=False
                )
                self._mid_line = True
                self._reply = ""
                self._start_col = 0
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
        self._print_held()
        self.console.file.flush()

    async def finalize(self, result: TurnResult) -> None:
        self._newline()
        self.console.file.flush()

    async def cleanup(self) -> None:
        self._mid_line = False
