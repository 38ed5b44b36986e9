"""One writer of streaming swipes per store: the partial-text writes of every turn streaming
into that store are grouped into one transaction.

A :class:`SwipeWriter` commits as a group. A streaming turn's background write (nobody waits
on it: the piece is already on its way to the client) waits up to ``window_s`` for others to
join its batch; a write that someone waits on (``now=True``: a reply's opening, a turn's last
write) starts the batch at the next turn of the event loop, taking along every write queued by
then. Every write that comes while a batch is in its transaction joins the next one. With 500
turns streaming at once, the store sees about one transaction per window (20 a second) instead
of one per piece or per tick, and one writer instead of 500 queued on the store's lock; a crash
loses at most the window on top of the sink's interval. Each caller still waits for its own write
and gets its own error: a swipe that no longer exists is :class:`~tavernkit.errors.NotFound`
to its turn only; when a batch fails as a whole, each of its writes is tried on its own
(``update_swipe_text``), so only the writes that fail again fail their turns. A database that
cannot be reached (:class:`~tavernkit.errors.StoreUnavailable`: restarting, a blip) fails no
turn at once: the batch is tried again (backoff 100 ms doubling to 2 s) for up to
``outage_s``, while the turns go on streaming and their texts wait in the next batch.
"""

from __future__ import annotations

import asyncio
import weakref

from tavernkit.errors import NotFound, StoreUnavailable
from tavernkit.store.chat_types import SwipeText
from tavernkit.store.protocol import Store

__all__ = ["OUTAGE_S", "WINDOW_S", "SwipeWriter", "swipe_writer"]

_WRITERS: weakref.WeakKeyDictionary[Store, SwipeWriter] = weakref.WeakKeyDictionary()


def swipe_writer(store: Store) -> SwipeWriter:
    """The store's one writer (made on first use, dropped with the store)."""
    writer = _WRITERS.get(store)
    if writer is None:
        writer = _WRITERS[store] = SwipeWriter(store)
    return writer


#: how long a background write waits for others to join its transaction
WINDOW_S = 0.05
#: how long a batch is tried again while the database cannot be reached (a restart)
OUTAGE_S = 30.0


class SwipeWriter:
    """Group commits of streaming swipe texts into ``store`` (see the module docstring)."""

    def __init__(
        self, store: Store, *, window_s: float = WINDOW_S, outage_s: float = OUTAGE_S
    ) -> None:
        self.store = store
        self.window_s = window_s
        self.outage_s = outage_s
        self._queue: list[tuple[SwipeText, asyncio.Future[None]]] = []
        self._runner: asyncio.Task[None] | None = None
        self._batch: list[tuple[SwipeText, asyncio.Future[None]]] = []  # in its transaction
        self._due = float("inf")  # when the queued writes' batch starts (loop time)
        self._early: asyncio.Future[None] | None = None  # the runner waiting for ``_due``
        #: how many transactions it ran and how many swipes they wrote (for benchmarks)
        self.batches = 0
        self.writes = 0

    async def write(self, item: SwipeText, *, now: bool = False) -> None:
        """Store ``item`` (partial) with whatever else is waiting; returns once it is stored.
        ``now``: someone waits on it, so its batch starts at the next turn of the loop
        (otherwise within ``window_s``). Cancelling the caller does not cut the batch off: it
        is written whole."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._queue.append((item, future))
        if now:
            self.hurry()
        else:
            self._due = min(self._due, loop.time() + self.window_s)
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run())
            self._runner.add_done_callback(self._ended)
        await asyncio.shield(future)

    def hurry(self) -> None:
        """Start the queued writes' batch at the next turn of the loop (a turn that ends waits
        on a background write of its own: it need not wait out the window)."""
        if not self._queue:
            return
        self._due = float("-inf")
        early = self._early
        if early is not None and not early.done():
            early.set_result(None)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._queue:
            delay = self._due - loop.time()
            if delay > 0:
                self._early = early = loop.create_future()
                timer = loop.call_later(delay, _wake, early)
                try:
                    await early
                finally:
                    timer.cancel()
                    self._early = None
            else:
                await asyncio.sleep(0)  # the writes of this turn of the loop join the batch
            self._batch, self._queue = self._queue, []
            self._due = float("inf")
            await self._write(self._batch)
        self._batch = []

    def _ended(self, runner: asyncio.Task[None]) -> None:
        """A runner cancelled (the loop shutting down, even before it ran): no waiter is left
        hanging on a write it will never make."""
        if runner.cancelled():
            for _, future in [*self._batch, *self._queue]:
                future.cancel()
            self._batch, self._queue = [], []

    async def _write(self, batch: list[tuple[SwipeText, asyncio.Future[None]]]) -> None:
        try:
            missing = await self._through_outage([item for item, _ in batch])
        except StoreUnavailable as exc:  # down for good: every write alike, none tried alone
            for _, future in batch:
                _settle(future, exc)
            return
        except Exception:
            # one write's trouble (a deadlock with another process's rows, say) is not every
            # turn's: each is tried on its own, and fails alone
            await _each(self.store, batch)
            return
        self.batches += 1
        self.writes += len(batch)
        for n, (item, future) in enumerate(batch):
            _settle(
                future,
                NotFound(f"no swipe {item.swipe_index} on message {item.message_id!r}")
                if n in missing
                else None,
            )

    async def _through_outage(self, items: list[SwipeText]) -> set[int]:
        """``update_swipe_texts(items)``, tried again while the database is unreachable (for
        up to ``outage_s``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.outage_s
        backoff = 0.1
        while True:
            try:
                return set(await self.store.update_swipe_texts(items))
            except StoreUnavailable:
                if loop.time() + backoff > deadline:
                    raise
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _each(store: Store, batch: list[tuple[SwipeText, asyncio.Future[None]]]) -> None:
    for item, future in batch:
        try:
            await store.update_swipe_text(
                item.message_id, item.swipe_index, item.text, complete=False, owner=item.owner
            )
        except Exception as exc:
            _settle(future, exc)
        else:
            _settle(future, None)


def _settle(future: asyncio.Future[None], error: Exception | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
        # a caller cancelled while it waited never reads it: no "never retrieved" warning
        future.add_done_callback(_read_exception)


def _read_exception(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()
