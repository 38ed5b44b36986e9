"""A turn's writes to its event log (:class:`TurnLogWriter`): in order, batched on a log that
takes batches (Redis), retried while the log is away, and closed at the turn's end."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from tavernkit.chat.ticks import next_tick
from tavernkit.errors import TavernKitError
from tavernkit.server.coordination import TurnEventLog

logger = logging.getLogger(__name__)

__all__ = [
    "FLUSH_BATCH",
    "FLUSH_WINDOW_S",
    "PIECE_TYPES",
    "TurnLogWriter",
    "merged_pieces",
    "type_name",
]

#: the log entries that are pieces of a reply (timed by
#: :class:`~tavernkit.server.metrics.PieceTimer`, joined by :func:`merged_pieces`)
PIECE_TYPES = frozenset({"text", "reasoning"})

#: how long a turn's pieces gather before they go to a log that batches (Redis) in one write:
#: a piece after a quiet moment goes at once, later ones wait at most this long (50 ms, the
#: swipe writer's window, saved a write or two per turn's CPU but added ~85 ms to the median
#: per-piece latency of 500 streams in ``benchmarks/scale.py --part streams``)
FLUSH_WINDOW_S = 0.025
#: a batch this long is written without waiting for the window's end
FLUSH_BATCH = 64


class TurnLogWriter:
    """A turn's appends to its log, in order.

    On a log that takes a batch (:class:`~tavernkit.server.redis_coordination.RedisTurnEventLog`
    has ``append_batch``) the events gather and one task writes them: at most one write per
    tick of ``window_s`` (the first piece after a quiet window goes at once), or at once when
    ``batch`` wait; a turn of 40 pieces is a few writes instead of 40, and the turns
    streaming at once write on the same ticks (the log sends them as one pipeline). On a log
    that appends in place (the in-memory one) each event goes in place.

    A write that fails (Redis restarting) is kept, with every later event, and tried again in
    order (backoff 50 ms doubling to 1 s) while the turn goes on generating and storing.
    :meth:`finish` writes the turn's last events and closes the log (on a log that batches,
    in the same write), waiting up to ``finish_s`` for the log to take them. Retrying is
    safe: the Redis log refuses an event it already has (its ids are the turn's own)."""

    def __init__(
        self,
        log: TurnEventLog,
        turn_id: str,
        *,
        finish_s: float = 60.0,
        window_s: float = FLUSH_WINDOW_S,
        batch: int = FLUSH_BATCH,
    ) -> None:
        self.log = log
        self.turn_id = turn_id
        self.finish_s = finish_s
        self.window_s = window_s
        self.batch = batch
        self._in_place: Callable[[str, str, Mapping[str, Any]], str] | None = getattr(
            log, "append_nowait", None
        )
        self._append_batch: _AppendBatch | None = getattr(log, "append_batch", None)
        self._pending: deque[tuple[str, Mapping[str, Any]]] = deque()
        self._writer: asyncio.Task[None] | None = None
        self._full = asyncio.Event()
        self._last_write = float("-inf")
        self._failing = False
        self._finishing = False
        #: set by :meth:`finish` on a batching log: the last batch also closes the log
        self._close_ttl_s: float | None = None
        self._closed = False
        #: writes made to the log (a batch is one)
        self.writes = 0
        #: an ``error`` event was appended (a turn's failure then adds no second one)
        self.errored = False

    @property
    def behind(self) -> int:
        """How many events wait for the log to take them."""
        return len(self._pending)

    @property
    def in_place(self) -> bool:
        """Whether :meth:`append_nowait` never needs the loop (every log this writer serves
        does: a batching log through its task, the in-memory one in place)."""
        return self._in_place is not None or self._append_batch is not None

    def append_nowait(self, type: str, data: Mapping[str, Any]) -> None:
        """Append without waiting: in place on the in-memory log, else queued for the next
        write (requires :attr:`in_place`)."""
        self.errored = self.errored or type == "error"
        if self._in_place is not None and not self._pending:
            self._in_place(self.turn_id, type, data)
            self.writes += 1
            return
        self._pending.append((type, data))
        if len(self._pending) >= self.batch:
            self._full.set()
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_pending())

    async def append(self, type: str, data: Mapping[str, Any]) -> None:
        if self.in_place:
            self.append_nowait(type, data)
            return
        # a log with only the protocol's append: one write per event, in order
        self.errored = self.errored or type == "error"
        if self._pending:
            self._pending.append((type, data))
            return
        try:
            await self.log.append(self.turn_id, type, data)
            self.writes += 1
        except TavernKitError as exc:
            logger.warning("a turn's event log failed (%s); retrying", type_name(exc))
            self._pending.append((type, data))
            self._writer = asyncio.create_task(self._write_pending())

    async def _write_pending(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = 0.05
        while self._pending:
            # the process's tick clock: the turns streaming at once write together, in one
            # pipeline (tavernkit.server.redis_log_batches)
            wait = next_tick(self._last_write, self.window_s) - loop.time()
            if wait > 0 and len(self._pending) < self.batch and not self._finishing:
                self._full.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), wait)
            taken = list(itertools.islice(self._pending, self.batch))
            events = merged_pieces(taken) if self._append_batch is not None else taken
            # the turn's last events and the log's end in one write
            closing = self._close_ttl_s if len(taken) == len(self._pending) else None
            # the same events are tried until they land: a retried batch keeps its ids
            while True:
                try:
                    await self._write(events, close_ttl_s=closing)
                    break
                except TavernKitError as exc:
                    if not self._failing:
                        self._failing = True
                        logger.warning("a turn's event log failed (%s); retrying", type_name(exc))
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
            self._failing, backoff = False, 0.05
            self._last_write = loop.time()
            self.writes += 1
            self._closed = closing is not None
            for _ in taken:
                self._pending.popleft()

    async def _write(
        self, events: list[tuple[str, Mapping[str, Any]]], *, close_ttl_s: float | None = None
    ) -> None:
        if self._append_batch is not None:
            await self._append_batch(self.turn_id, events, close_ttl_s=close_ttl_s)
        else:
            for type_, data in events:  # pragma: no branch - one at a time, as appended
                await self.log.append(self.turn_id, type_, data)

    async def finish(self, last: Sequence[tuple[str, dict[str, Any]]], *, ttl_s: float) -> None:
        """Append ``last`` after everything before it, then close the log; gives up (logged)
        after ``finish_s`` of a log that takes nothing."""
        if self._append_batch is not None:
            self._close_ttl_s = ttl_s  # the batch that takes the last events closes the log
        for type_, data in last:
            await self.append(type_, data)
        self._finishing = True  # the last events go now, not at the window's end
        self._full.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.finish_s
        try:
            if self._writer is not None:
                await asyncio.wait_for(asyncio.shield(self._writer), self.finish_s)
            if self._closed:
                return
            backoff = 0.05
            while True:
                try:
                    await self.log.close(self.turn_id, ttl_s=ttl_s)
                    return
                except TavernKitError:
                    if loop.time() + backoff > deadline:
                        raise
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
        except (TimeoutError, TavernKitError) as exc:
            logger.error(
                "a turn's last events could not be written (%s); its readers end on their own",
                type_name(exc),
            )
        finally:
            if self._writer is not None:
                self._writer.cancel()


def merged_pieces(
    events: Sequence[tuple[str, Mapping[str, Any]]],
) -> list[tuple[str, Mapping[str, Any]]]:
    """``events`` with each run of ``text`` (or ``reasoning``) pieces joined into one event:
    every byte in the same order, in fewer log entries (one write stores one per run)."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    for type_, data in events:
        if (
            out
            and type_ in PIECE_TYPES
            and out[-1][0] == type_
            and set(data) == set(out[-1][1]) == {"text"}
        ):
            out[-1] = (type_, {"text": out[-1][1]["text"] + data["text"]})
        else:
            out.append((type_, data))
    return out


class _AppendBatch(Protocol):
    async def __call__(
        self,
        turn_id: str,
        events: Sequence[tuple[str, Mapping[str, Any]]],
        *,
        close_ttl_s: float | None = None,
    ) -> None: ...


def type_name(exc: BaseException | None) -> str:
    return type(exc).__name__
