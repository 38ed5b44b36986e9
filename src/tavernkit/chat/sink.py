"""The sinks of a chat turn: :class:`StoreSink` persists the reply as it streams, and
:class:`TeeSink` hands every event to several sinks (the store and the terminal, say).

The store sink writes the swipe being generated with ``update_swipe_text(complete=False)``, so
a process killed mid-reply leaves the text the user already saw in the store, marked partial.
``emit`` never waits for the store: a piece is only added to the text, and a background writer
stores the text at most once per ``min_interval`` seconds (on ticks of one clock, the first
piece's write too, so that turns streaming at once write together), so
the next sink (the client's stream) sees the piece without a store write in front of it.
With the store's :class:`~tavernkit.chat.swipe_writer.SwipeWriter`, a background write also
waits up to the writer's window for other turns' writes to share its transaction.
Nothing is dropped: text that arrives while the writer waits or writes is written by its next
round, and what a crash loses is at most the last interval (and the writer's window). ``flush``
stops a writer that is still waiting and writes the whole text itself (so what the client was
shown is what is stored when the turn ends, also when it was stopped); ``cleanup`` stops a
waiting writer; both wait for a write already under way (hurried past the writer's window),
which runs to its end and the store sees whole. A background write that failed is raised by
the next ``emit`` or ``flush``. Reasoning has no column of its own; when it changes the message
row is rewritten (one row, never the chat) and the swipe is marked partial again.

The final write (text, reasoning, model, dates) is the chat service's, after the turn: it
knows whether the turn completed, failed or was stopped, which the sink does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypedDict, Unpack

from tavernkit.chat.swipe_writer import SwipeWriter
from tavernkit.chat.ticks import next_tick
from tavernkit.generation.result import TurnResult
from tavernkit.generation.sink import ResponseSink, SinkEvent, WithdrawEvent, without_tail
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.models.chat import Message
from tavernkit.providers.events import ReasoningDelta, TextDelta
from tavernkit.run_to_end import run_to_end
from tavernkit.store.chat_types import SwipeText
from tavernkit.store.protocol import Store

__all__ = ["ContinuationJoin", "Continued", "StoreSink", "StoreSinkOptions", "TeeSink"]


@dataclasses.dataclass(frozen=True, slots=True)
class Continued:
    """What a continued reply already holds: its text and its reasoning (the new pieces are
    written after them)."""

    text: str = ""
    reasoning: str = ""


NOT_CONTINUED = Continued()


class StoreSinkOptions(TypedDict, total=False):
    """:class:`StoreSink`'s keyword options: the chat's ``owner``, what a ``continued`` reply
    already holds, the least time between two writes (``min_interval``, seconds, by
    ``clock``), and the ``writer`` and ``place`` its docstring describes."""

    owner: str
    continued: Continued
    min_interval: float
    clock: Callable[[], float]
    writer: SwipeWriter | None
    place: Callable[[], Awaitable[tuple[str, int, Message]]] | None


class StoreSink:
    """A :class:`~tavernkit.generation.sink.ResponseSink` that persists one streaming swipe.

    ``message`` is the stored reply as it was before the turn (the swipe at ``swipe_index``
    active); ``prefix`` is text the swipe already held (a continued reply), kept in front of
    what streams. ``writer``: the store's :class:`~tavernkit.chat.swipe_writer.SwipeWriter`,
    which writes the texts of many streaming turns in one transaction (without it, each
    write is its own ``update_swipe_text``). ``place``: the reply's place is still being
    stored (it gives message id, swipe index and message when it is): the first write waits
    for it, pieces are taken meanwhile, and a place that could not be stored fails that write.
    """

    def __init__(
        self,
        store: Store,
        message_id: str,
        swipe_index: int,
        message: Message,
        **options: Unpack[StoreSinkOptions],
    ) -> None:
        unknown = sorted(set(options) - set(StoreSinkOptions.__annotations__))
        if unknown:
            raise TypeError(f"StoreSink() got an unexpected keyword argument {unknown[0]!r}")
        continued = options.get("continued", NOT_CONTINUED)
        self.store = store
        self._place = options.get("place")
        self.message_id = message_id
        self.swipe_index = swipe_index
        self.message = message
        self.owner = options.get("owner", DEFAULT_OWNER)
        self.prefix = continued.text
        self.reasoning_prefix = continued.reasoning
        self.min_interval = options.get("min_interval", 0.2)
        self.clock = options.get("clock", time.monotonic)
        self.writer = options.get("writer")
        self.text = ""
        self.reasoning = ""
        self._written_text: str | None = None
        self._written_reasoning = ""
        self._last_write = float("-inf")
        self._timer: asyncio.Task[None] | None = None
        self._timer_waiting = False
        self._stopping = False  # flush or cleanup: the writer ends after the write under way
        self._lock = asyncio.Lock()

    @property
    def full_text(self) -> str:
        return self.prefix + self.text

    @property
    def full_reasoning(self) -> str:
        return self.reasoning_prefix + self.reasoning

    async def emit(self, event: SinkEvent) -> None:
        self.emit_nowait(event)

    def emit_nowait(self, event: SinkEvent) -> None:
        """:meth:`emit` as it is: the piece is taken in place, never waited on (the turn
        runner calls this one, with no queue in front of the sink)."""
        if isinstance(event, TextDelta):
            self.text += event.text
        elif isinstance(event, WithdrawEvent):
            # a failed attempt's unfinished clause: its continuation stores it again
            self.text = without_tail(self.text, event.text)
        elif isinstance(event, ReasoningDelta):
            self.reasoning += event.text
        else:
            return
        timer = self._timer
        if timer is not None and not timer.done():
            return  # the writer under way takes this piece in its next round
        if timer is not None:
            timer.result()  # a background write that failed fails the turn's next piece
        self._timer_waiting = True
        self._stopping = False
        self._timer = asyncio.create_task(self._write_rounds())

    def _dirty(self) -> bool:
        return (
            self.full_text != self._written_text or self.full_reasoning != self._written_reasoning
        )

    async def _write_rounds(self) -> None:
        """Write, then again after each ``min_interval`` while pieces keep coming."""
        while True:
            # on ticks of one clock for every turn, the first write too: the turns streaming at
            # once store their texts together, in one batch of the store's writer (a write of
            # its own for each turn's first piece cost PostgreSQL a statement per turn), and a
            # crash still loses at most one interval
            now = self.clock()
            last = self._last_write if self._last_write > float("-inf") else now
            await asyncio.sleep(max(0.0, next_tick(last, self.min_interval) - now))
            # still waiting (a flush cancels this and writes itself, at once)
            await self._resolve_place()
            # From here on the writer is a write under way: flush and cleanup wait for it.
            self._timer_waiting = False
            await self._write(now=False)
            if self._stopping or not self._dirty():
                return  # flush writes the rest itself
            self._timer_waiting = True

    async def _resolve_place(self) -> None:
        if self._place is not None:
            self.message_id, self.swipe_index, self.message = await self._place()
            self._place = None

    async def _write(self, *, now: bool = True) -> None:
        """Store what changed; ``now=False``: a background round, whose text may wait the
        writer's window for other turns' writes to share its transaction."""
        async with self._lock:
            await self._resolve_place()
            self._last_write = self.clock()
            reasoning = self.full_reasoning
            if reasoning != self._written_reasoning:
                draft = self.message.model_copy(deep=True)
                draft.mes = self.full_text
                draft.extra.reasoning = reasoning
                draft.sync_to_swipe()
                await self.store.update_message(self.message_id, draft, owner=self.owner)
                self._written_reasoning = reasoning
                self._written_text = None  # the rewrite cleared the partial mark
            text = self.full_text
            if text != self._written_text:
                if self.writer is not None:
                    await self.writer.write(
                        SwipeText(self.message_id, self.swipe_index, text, self.owner), now=now
                    )
                else:
                    await self.store.update_swipe_text(
                        self.message_id, self.swipe_index, text, complete=False, owner=self.owner
                    )
                self._written_text = text

    async def flush(self) -> None:
        await self._cancel_timer()
        await self._write()

    async def finalize(self, result: TurnResult) -> None:
        await self.flush()

    async def cleanup(self) -> None:
        await self._cancel_timer()

    async def _cancel_timer(self) -> None:
        """Stop a timer that is still waiting; a timer already writing is waited for, to its
        end even if this call is cancelled (cut off, its transaction would be lost)."""
        timer, self._timer = self._timer, None
        if timer is None:
            return
        self._stopping = True
        if self._timer_waiting and not timer.done():
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer
            return
        if self.writer is not None:
            self.writer.hurry()  # the write under way need not wait out the writer's window
        await run_to_end(timer)


class TeeSink:
    """Every event to every sink, in the order the sinks are given (the store first: its
    ``emit`` only takes the piece, its writer stores it in the background). ``cleanup`` runs
    every sink's even if one fails. When every sink can take a piece in place
    (``emit_nowait``), so can the tee."""

    def __init__(self, sinks: Sequence[ResponseSink]) -> None:
        self.sinks = list(sinks)
        nowaits = [getattr(sink, "emit_nowait", None) for sink in self.sinks]
        self._nowaits: list[Callable[[SinkEvent], object]] | None = (
            [n for n in nowaits if callable(n)] if all(callable(n) for n in nowaits) else None
        )

    async def emit(self, event: SinkEvent) -> None:
        for sink in self.sinks:
            await sink.emit(event)

    @property
    def emit_nowait(self) -> Callable[[SinkEvent], None] | None:
        """Every sink's ``emit_nowait`` in turn, when every sink has one (``None`` when one
        must be awaited: then the runner queues for :meth:`emit`)."""
        return self._emit_now if self._nowaits is not None else None

    def _emit_now(self, event: SinkEvent) -> None:
        assert self._nowaits is not None
        for emit in self._nowaits:
            emit(event)

    async def flush(self) -> None:
        for sink in self.sinks:
            await sink.flush()

    async def finalize(self, result: TurnResult) -> None:
        for sink in self.sinks:
            await sink.finalize(result)

    async def cleanup(self) -> None:
        errors: list[BaseException] = []
        for sink in self.sinks:
            try:
                await sink.cleanup()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]


class ContinuationJoin:
    """A continued reply's first piece as it joins the message it continues: ``postfix`` (the
    preset's ``continue_postfix``) goes before it when neither the message's end nor the
    piece's start is a space, the rule the stored reply follows
    (:func:`tavernkit.chat.reply.continue_postfix`), so every sink, the store's included, is
    given the text as it will be stored."""

    def __init__(self, inner: TeeSink, prefix: str, postfix: str) -> None:
        self.inner = inner
        self.prefix = prefix
        self.postfix = postfix
        self._joined = False

    def _join(self, event: SinkEvent) -> SinkEvent:
        if self._joined or not isinstance(event, TextDelta) or not event.text:
            return event
        self._joined = True
        if self.prefix[-1:].isspace() or event.text[:1].isspace():
            return event
        return dataclasses.replace(event, text=self.postfix + event.text)

    async def emit(self, event: SinkEvent) -> None:
        await self.inner.emit(self._join(event))

    @property
    def emit_nowait(self) -> Callable[[SinkEvent], None] | None:
        inner = self.inner.emit_nowait
        if inner is None:
            return None
        return lambda event: inner(self._join(event))

    async def flush(self) -> None:
        await self.inner.flush()

    async def finalize(self, result: TurnResult) -> None:
        await self.inner.finalize(result)

    async def cleanup(self) -> None:
        await self.inner.cleanup()
