"""One writer of streaming swipes per store: the partial-text writes of every turn streaming
into that store are grouped into one transaction.

A :class:`SwipeWriter` commits as a group: a write that comes while no batch is being written
starts one at the next turn of the event loop (so a lone turn's write waits for nothing), and
every write that comes while a batch is in its transaction joins the next one. With 500 turns
streaming at once, the store sees a few transactions a tick instead of one per piece, and one
writer instead of 500 queued on the store's lock. Each caller still waits for its own write
and gets its own error: a swipe that no longer exists is :class:`~tavernkit.errors.NotFound`
to its turn only; when a batch fails as a whole, each of its writes is tried on its own
(``update_swipe_text``), so only the writes that fail again fail their turns.
"""

from __future__ import annotations

import asyncio
import weakref

from tavernkit.errors import NotFound
from tavernkit.store.protocol import Store, SwipeText

__all__ = ["SwipeWriter", "swipe_writer"]

_WRITERS: weakref.WeakKeyDictionary[Store, SwipeWriter] = weakref.WeakKeyDictionary()


def swipe_writer(store: Store) -> SwipeWriter:
    """The store's one writer (made on first use, dropped with the store)."""
    writer = _WRITERS.get(store)
    if writer is None:
        writer = _WRITERS[store] = SwipeWriter(store)
    return writer


class SwipeWriter:
    """Group commits of streaming swipe texts into ``store`` (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._queue: list[tuple[SwipeText, asyncio.Future[None]]] = []
        self._runner: asyncio.Task[None] | None = None
        self._batch: list[tuple[SwipeText, asyncio.Future[None]]] = []  # in its transaction
        #: how many transactions it ran and how many swipes they wrote (for benchmarks)
        self.batches = 0
        self.writes = 0

    async def write(self, item: SwipeText) -> None:
        """Store ``item`` (partial) with whatever else is waiting; returns once it is stored.
        Cancelling the caller does not cut the batch off: it is written whole."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run())
            self._runner.add_done_callback(self._ended)
        await asyncio.shield(future)

    async def _run(self) -> None:
        await asyncio.sleep(0)  # the writes of this turn of the loop join the first batch
        while self._queue:
            self._batch, self._queue = self._queue, []
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
            missing = set(await self.store.update_swipe_texts([item for item, _ in batch]))
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
