"""Ordered delivery to a sink, decoupled from reading the stream.

Reading the provider's stream must not wait on a slow sink (a webhook send, a database
write): the idle timeout would fire on our own slowness. So events go through a queue that one
worker drains in order. That also makes "delivered" precise: a text counts as delivered to an
attempt once the sink's ``emit`` for it returned.

A sink that can never block (it appends to memory, prints, or drops) may offer a synchronous
``emit_nowait(event)``; delivery then calls it in place and needs no queue and no worker task,
which saves a few event-loop switches per event (most of the runner's own cost per turn).

After a provider timeout the runner waits a bounded settle time for sends already under way
(:meth:`Delivery.settle`); an attempt is then frozen: a send that lands later is still shown
(and is part of the turn's text) but is not part of the carried text the next attempt
continues from, and queued sends that had not started are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable

from tavernkit.errors import ProviderError
from tavernkit.generation.continuation import TextPipe
from tavernkit.generation.sink import ResponseSink, SinkEvent, WithdrawEvent, without_tail
from tavernkit.providers.accumulator import Accumulator, Completion
from tavernkit.providers.events import ProviderErrorEvent, ReasoningDelta, StreamEvent, TextDelta

log = logging.getLogger("tavernkit.generation.delivery")

__all__ = ["Delivery"]

Sleep = Callable[[float], Awaitable[object]]


class Delivery:
    def __init__(self, sink: ResponseSink) -> None:
        self.sink = sink
        self._items: deque[tuple[int, SinkEvent]] = deque()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._busy = False
        self._worker: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self._texts: list[str] = []
        self._by_attempt: dict[int, list[str]] = {}
        self._frozen: set[int] = set()
        nowait = getattr(sink, "emit_nowait", None)
        self._nowait: Callable[[SinkEvent], object] | None = nowait if callable(nowait) else None

    def send(self, attempt: int, event: SinkEvent) -> None:
        if self._nowait is not None:
            try:
                self._nowait(event)
            except Exception as exc:  # surfaced by drain(), as a failed queued emit would be
                self._error = self._error or exc
                return
            self._record(attempt, event)
            return
        if self._worker is None:
            self._worker = asyncio.ensure_future(self._run())
        self._items.append((attempt, event))
        self._idle.clear()
        self._wake.set()

    async def _run(self) -> None:
        while True:
            if not self._items:
                self._busy = False
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            attempt, event = self._items.popleft()
            self._busy = True
            try:
                await self.sink.emit(event)
            except Exception as exc:  # surfaced by drain(); the turn decides what it means
                self._error = self._error or exc
                continue
            self._record(attempt, event)

    def _record(self, attempt: int, event: SinkEvent) -> None:
        kind = type(event)
        if kind is TextDelta:
            text: str = event.text  # type: ignore[union-attr]
            self._texts.append(text)
            if attempt not in self._frozen:
                self._by_attempt.setdefault(attempt, []).append(text)
        elif kind is WithdrawEvent:
            tail: str = event.text  # type: ignore[union-attr]
            self._texts[:] = [without_tail("".join(self._texts), tail)]
            if attempt not in self._frozen:
                own = self._by_attempt.setdefault(attempt, [])
                own[:] = [without_tail("".join(own), tail)]

    def take_back(self, attempt: int, pipe: TextPipe) -> None:
        """Send what ``pipe`` takes back of the text it showed, if anything."""
        if pipe.withdrawn:
            self.send(attempt, WithdrawEvent(pipe.take_withdrawn()))

    async def drain(self) -> None:
        """Wait until everything queued was emitted; re-raise a sink failure."""
        await self._idle.wait()
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    async def settle(self, attempt: int, seconds: float, sleep: Sleep) -> bool:
        """Wait at most ``seconds`` (on the injected ``sleep``) for sends under way; then
        freeze ``attempt``. Returns whether everything landed in time."""
        landed = True
        if not self._idle.is_set():
            idle = asyncio.ensure_future(self._idle.wait())
            timer = asyncio.ensure_future(sleep(max(seconds, 0.0)))
            try:
                done, _ = await asyncio.wait({idle, timer}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (idle, timer):
                    task.cancel()
            landed = idle in done
            if not landed:
                # not started yet: never shown, so neither delivered nor carried
                kept = [item for item in self._items if item[0] != attempt]
                dropped = [event for n, event in self._items if n == attempt]
                self._items.clear()
                self._items.extend(kept)
                withdraw = _still_to_withdraw(dropped)
                if withdraw:
                    self._items.append((attempt, WithdrawEvent(withdraw)))
        self._frozen.add(attempt)
        return landed

    def delivered(self, attempt: int) -> str:
        return "".join(self._by_attempt.get(attempt, ()))

    @property
    def text(self) -> str:
        """Everything the sink received, in order (late sends included)."""
        return "".join(self._texts)

    async def stream(
        self, events: AsyncIterator[StreamEvent], pipe: TextPipe, attempt: int
    ) -> tuple[Completion, BaseException | None]:
        """Read one response: text through ``pipe`` to the sink, reasoning live (unless held),
        everything into a :class:`Completion`. The error ends the read; it is returned, not
        raised, with what had arrived."""
        accumulator = Accumulator()
        error: BaseException | None = None
        feed, pipe_feed, send = accumulator.feed, pipe.feed, self.send
        try:
            async for event in events:
                feed(event)
                kind = type(event)
                if kind is TextDelta:
                    out = pipe_feed(event.text)  # type: ignore[union-attr]
                    if pipe.withdrawn:
                        self.take_back(attempt, pipe)
                    if out:
                        send(attempt, TextDelta(out))
                    if pipe.wrong_speaker or pipe.cut:
                        break
                elif kind is ReasoningDelta:
                    if not pipe.hold:
                        send(attempt, event)  # type: ignore[arg-type]
                elif kind is ProviderErrorEvent:
                    error = event.error  # type: ignore[union-attr]
                    break
        except ProviderError as exc:
            error = exc
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()
        return accumulator.result(), error

    async def give_up(
        self,
        pipe: TextPipe,
        attempt: int,
        *,
        visible: bool,
        settle: float | None,
        sleep: Sleep,
    ) -> None:
        """End a failed attempt's delivery. A visible error keeps the unfinished clause
        (shown first when it was held); a suppressed one takes it back (the continuation
        writes it instead, so it is shown once). After a timeout (``settle`` seconds given)
        sends under way get that long to land."""
        rest = pipe.keep() if visible and not pipe.hold else pipe.abandon()
        self.take_back(attempt, pipe)
        if rest:
            self.send(attempt, TextDelta(rest))
        if settle is None:
            await self.drain()
        elif not await self.settle(attempt, settle, sleep):
            log.info("delivery: sends still under way after the settle time")

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None


def _still_to_withdraw(dropped: list[SinkEvent]) -> str:
    """What of the withdrawals among ``dropped`` (queued events never sent) still has to be
    taken back: the dropped text was never shown, so it needs no taking back."""
    shown_of_dropped = ""
    withdraw = ""
    for event in dropped:
        if type(event) is TextDelta:
            shown_of_dropped += event.text
        elif isinstance(event, WithdrawEvent):
            tail = event.text
            covered = min(len(tail), len(shown_of_dropped))
            shown_of_dropped = without_tail(shown_of_dropped, tail)
            # the part of the tail beyond the dropped text was sent, and is taken back
            withdraw = tail[: len(tail) - covered] + withdraw
    return withdraw
