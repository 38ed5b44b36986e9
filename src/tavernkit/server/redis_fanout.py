"""One blocking read per process for every reader of every turn's Redis stream.

A reader of a turn (an SSE client) must not hold a pooled Redis connection while it waits:
with one ``XREAD BLOCK`` per reader, a process could serve as many live streams as its pool
had connections (issue 37: the default pool of 100 capped a process at ~50 streams, and the
rest hung). :class:`StreamFanout` runs one task that blocks on every watched stream at once
(one ``XREAD`` naming them all) and hands each new entry to the readers of its stream, each
through a queue of its own: waiting readers cost no connection and no Redis call.

A stream this process writes itself (a turn it runs: :meth:`StreamFanout.own`) is not read
back: the writer hands each batch it wrote to the stream's readers here
(:meth:`StreamFanout.publish`), which keeps them while it is written, so a reader that joins
midway gets what came before from here too, with no Redis call. Reading one's own writes back
was an ``XREAD`` (and its wake-up) per write, as many Redis calls as the writes themselves;
reading each joining reader's past from Redis instead was a burst of calls when hundreds of
streams start at once, queued before the turns' own writes.

A reader that joins while the task is blocked wakes it by appending to a stream of this
process's own (``<prefix>wake:<uuid>``, which the blocked ``XREAD`` also names), so the next
read names the new stream at once instead of after the block timeout. Each stream is read
from the oldest position any of its readers needs; a reader drops what it already has.

Redis unreachable: the task retries with backoff (50 ms doubling to 2 s) and readers keep
waiting; after ``outage_s`` of failures each reader gets a
:class:`~tavernkit.errors.CoordinationError` (its stream then ends with an ``error`` event,
and the client reconnects with ``Last-Event-ID``). A watched stream missing at two checks
``missing_s`` apart (it expired without an end marker) ends its readers: not at the first
check, because a restarted Redis has lost the streams of turns that are still running and
write their next events in a moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from tavernkit.errors import CoordinationError

__all__ = ["Entry", "FanoutReader", "StreamFanout", "parse_id"]

log = logging.getLogger(__name__)

#: one stream entry: its id and its fields (decoded)
Entry = tuple[str, dict[str, str]]


def parse_id(event_id: str) -> tuple[int, int]:
    """A stream id (``ms-seq``) as a pair that orders as Redis orders ids."""
    ms, _, seq = event_id.partition("-")
    return int(ms), int(seq or 0)


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


class FanoutReader:
    """One reader's side: :meth:`next` gives the stream's next entries after :attr:`last`,
    ``None`` once the stream ended (its end marker was read, or it is gone)."""

    __slots__ = ("_queue", "key", "last")

    def __init__(self, key: str, last: str) -> None:
        self.key = key
        self.last = parse_id(last)
        self._queue: asyncio.Queue[list[Entry] | BaseException | None] = asyncio.Queue()

    async def next(self) -> list[Entry] | None:
        item = await self._queue.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def _offer(self, entries: list[Entry]) -> None:
        fresh = [e for e in entries if parse_id(e[0]) > self.last]
        if fresh:
            self.last = parse_id(fresh[-1][0])
            self._queue.put_nowait(fresh)

    def _end(self, why: BaseException | None = None) -> None:
        self._queue.put_nowait(why)


class StreamFanout:
    """Every reader of this process on one blocking ``XREAD`` (see the module docstring).
    ``is_end(fields)``: whether an entry is a stream's end marker (its readers end after it).
    """

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        prefix: str,
        is_end: Callable[[dict[str, str]], bool],
        block_ms: int = 2000,
        outage_s: float = 30.0,
        missing_s: float = 30.0,
        count: int = 512,
    ) -> None:
        self._redis = client
        self._is_end = is_end
        self._block_ms = block_ms
        self._outage_s = outage_s
        self._missing_s = missing_s
        self._count = count
        self._wake_key = f"{prefix}wake:{uuid.uuid4().hex}"
        self._wake_last = "0-0"
        self._readers: dict[str, set[FanoutReader]] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: the task waits in an XREAD now (a new reader must wake it)
        self._blocked = False
        self._wake_sent = False
        #: stream -> loop time it was first seen missing
        self._missing: dict[str, float] = {}
        #: the streams this process writes, with every entry published so far: their
        #: readers get them from :meth:`publish`, not from the blocking read
        self._local: dict[str, list[Entry]] = {}
        self._checked_at = 0.0

    @property
    def readers(self) -> int:
        """How many readers wait on this process's streams now."""
        return sum(len(r) for r in self._readers.values())

    def own(self, key: str) -> None:
        """This process writes stream ``key`` from now on (before its first entry): its
        readers here get its entries from :meth:`publish`, not from the blocking read."""
        self._local.setdefault(key, [])

    async def disown(self, key: str) -> None:
        """This process writes ``key`` no more: readers still on it (its end was not
        written) go back to the blocking read, which checks that the stream is there."""
        self._local.pop(key, None)
        if key in self._readers:
            await self._named()

    def publish(self, key: str, entries: list[Entry]) -> None:
        """Entries this process just wrote to its own stream ``key``, for its readers."""
        written = self._local.get(key)
        if written is None:
            return  # not (or no longer) this process's own: the blocking read has it
        known = parse_id(written[-1][0]) if written else (0, 0)
        fresh = [e for e in entries if parse_id(e[0]) > known]  # a write retried: once
        written += fresh
        for reader in list(self._readers.get(key, ())):
            self._give(reader, fresh)

    async def join(self, key: str, after: str) -> FanoutReader:
        """A reader of stream ``key`` from after id ``after`` (leave with :meth:`leave`)."""
        reader = FanoutReader(key, after)
        self._readers.setdefault(key, set()).add(reader)
        written = self._local.get(key)
        if written is not None:
            if written:  # its past, from here: nothing else runs until it is offered
                self._give(reader, written)
            return reader
        await self._named()
        return reader

    async def _named(self) -> None:
        """The blocking read names the streams of the readers now (woken if it waits)."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="tavernkit-stream-fanout")
        self._changed.set()
        if self._blocked and not self._wake_sent:
            self._wake_sent = True
            await self._wake()

    def _give(self, reader: FanoutReader, entries: list[Entry]) -> None:
        """``entries`` (in order) to ``reader``, up to the stream's end marker, which ends it."""
        for at, (_, values) in enumerate(entries):
            if self._is_end(values):
                entries = entries[: at + 1]
                reader._offer(entries)
                if reader.last >= parse_id(entries[-1][0]):
                    reader._end()
                    self.leave(reader)
                return
        reader._offer(entries)

    def leave(self, reader: FanoutReader) -> None:
        readers = self._readers.get(reader.key)
        if readers is not None:
            readers.discard(reader)
            if not readers:
                del self._readers[reader.key]
                self._missing.pop(reader.key, None)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for readers in list(self._readers.values()):
            for reader in readers:
                reader._end(CoordinationError("the server is shutting down"))
        self._readers.clear()

    async def _wake(self) -> None:
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.xadd(self._wake_key, {"w": "1"}, maxlen=16, approximate=False)
                pipe.expire(self._wake_key, 3600)
                await pipe.execute()
        except RedisError:
            # the task is failing too, and names the new stream at its next try
            self._wake_sent = False

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = 0.05
        failing_since: float | None = None
        while True:
            if not self._remote():
                self._changed.clear()
                await self._changed.wait()
                continue
            try:
                reply = await self._read_once()
            except RedisError as exc:
                now = loop.time()
                failing_since = now if failing_since is None else failing_since
                log.warning("reading turn events from Redis failed (%s)", type(exc).__name__)
                if now - failing_since >= self._outage_s:
                    self._fail_all()
                    failing_since = None
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            failing_since, backoff = None, 0.05
            self._deliver(reply)
            if not reply or loop.time() - self._checked_at >= self._missing_s / 2:
                await self._check_missing(loop.time())

    async def _read_once(self) -> Any:
        streams: dict[Any, Any] = {
            key: "{}-{}".format(*min(r.last for r in readers))
            for key, readers in self._remote().items()
        }
        streams[self._wake_key] = self._wake_last
        self._blocked = True
        try:
            return await self._redis.xread(streams, count=self._count, block=self._block_ms)
        finally:
            self._blocked = False
            self._wake_sent = False

    def _remote(self) -> dict[str, set[FanoutReader]]:
        """The readers' streams that the blocking read names (those others write)."""
        if not self._local:
            return self._readers
        return {k: r for k, r in self._readers.items() if k not in self._local}

    def _deliver(self, reply: Any) -> None:
        # [[stream, [(id, {field: value}), ...]], ...] (redis-py types it as any reply)
        for stream, raw_entries in reply or ():
            key = _text(stream)
            if key == self._wake_key:
                self._wake_last = _text(raw_entries[-1][0])
                continue
            readers = self._readers.get(key)
            if not readers:
                continue
            entries: list[Entry] = []
            ended = False
            for entry_id, fields in raw_entries:
                values = {_text(k): _text(v) for k, v in fields.items()}
                entries.append((_text(entry_id), values))
                if self._is_end(values):
                    ended = True
                    break
            for reader in list(readers):
                reader._offer(entries)
                if ended and reader.last >= parse_id(entries[-1][0]):
                    reader._end()
                    self.leave(reader)

    async def _check_missing(self, now: float) -> None:
        self._checked_at = now
        keys = list(self._remote())
        if not keys:
            return
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.exists(key)
                found = await pipe.execute()
        except RedisError:
            return  # the next read fails too, and says so
        for key, exists in zip(keys, found, strict=True):
            if exists:
                self._missing.pop(key, None)
                continue
            since = self._missing.setdefault(key, now)
            if now - since >= self._missing_s:
                for reader in list(self._readers.get(key, ())):
                    reader._end()
                    self.leave(reader)

    def _fail_all(self) -> None:
        error = CoordinationError("Redis has not answered for a while")
        for readers in list(self._readers.values()):
            for reader in list(readers):
                reader._end(error)
                self.leave(reader)
