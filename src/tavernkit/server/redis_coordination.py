"""What several server processes share, in Redis (redis-py's asyncio client): the
implementations of :mod:`tavernkit.server.coordination`'s protocols and of
:class:`~tavernkit.generation.keys.CooldownStore`.

- :class:`RedisTurnEventLog`: one stream per turn (``XADD``; event ids are the stream's ids, so
  they increase strictly and any process resumes a client from its ``Last-Event-ID``). Readers
  wait on the process's one blocking read (:mod:`tavernkit.server.redis_fanout`), holding no
  connection; closing appends an end marker and sets the stream's TTL, so readers end after
  the last event and late reconnects still find it for ``ttl_s``.
- :class:`RedisChatLock`: ``SET NX PX`` with the holder as value; renew and release are Lua
  compare-and-extend / compare-and-delete, so a holder never extends or drops another's lock,
  and a crashed holder's lock ends with its lease.
- :class:`RedisRateLimiter`: a sliding window per key (a sorted set of hit times, trimmed and
  counted in one Lua script on the server's clock, so processes with skewed clocks agree).
- :class:`RedisCooldownStore`: each key's :class:`~tavernkit.generation.keys.KeyStatus` as one
  JSON value, so a 429 seen through one process benches the key for every process.
- :class:`RedisTurnStops`: stop requests on one pub/sub channel; every process subscribes at
  start and stops the turns it runs (a request for a turn nobody runs reaches no one).

:func:`coordination_from_url` builds the five on one connection pool (:func:`redis_client`: a
bounded pool where a command waits for a free connection, and a broken connection is retried).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import quote

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT, FieldT

from tavernkit.errors import CoordinationError
from tavernkit.generation.keys import KeyStatus
from tavernkit.server.coordination import RateDecision, TurnEvent
from tavernkit.server.redis_fanout import StreamFanout
from tavernkit.server.redis_log_batches import Command, GroupWrite

__all__ = [
    "DEFAULT_REDIS_POOL",
    "REDIS_POOL_WAIT_S",
    "RedisChatLock",
    "RedisCooldownStore",
    "RedisCoordination",
    "RedisRateLimiter",
    "RedisTurnEventLog",
    "RedisTurnStops",
    "coordination_from_url",
    "redis_client",
    "subscribe_forever",
]

logger = logging.getLogger(__name__)

#: the stream entry that ends a turn's log (a type no event has)
_CLOSED = "__closed__"
#: the entry that ends a turn's log (its readers stop there)
_CLOSED_FIELDS = {"type": _CLOSED, "data": "{}"}
_EVENT_ID = re.compile(r"\d{1,20}-\d{1,20}")


@asynccontextmanager
async def _guard(where: str) -> AsyncIterator[None]:
    """Redis's own errors as :class:`~tavernkit.errors.CoordinationError` naming ``where``
    (the server, without its password); they never carry the values sent."""
    try:
        yield
    except RedisError as exc:
        raise CoordinationError(f"Redis at {where}: {type(exc).__name__}: {exc}") from exc


def _where(client: aioredis.Redis) -> str:
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix:{kwargs['path']}"
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"


def _fields(type: str, data: Mapping[str, Any]) -> dict[FieldT, EncodableT]:
    return _entry(_str_fields(type, data))


def _entry(fields: Mapping[str, str]) -> dict[FieldT, EncodableT]:
    entry: dict[FieldT, EncodableT] = {}
    entry.update(fields)
    return entry


def _str_fields(type: str, data: Mapping[str, Any]) -> dict[str, str]:
    """An event's stream entry fields, as a reader of the stream decodes them."""
    return {"type": type, "data": json.dumps(dict(data), ensure_ascii=False, separators=(",", ":"))}


def _part(value: str) -> str:
    """One part of a Redis key, quoted so that no owner or id can forge another's key."""
    return quote(value, safe="")


class RedisTurnEventLog:
    """:class:`~tavernkit.server.coordination.TurnEventLog` on Redis streams.

    The process that runs a turn numbers its events itself (``<start ms>-<n>``), so an append
    retried after a lost reply is refused by Redis as already there instead of written twice,
    and the ids stay those a client resumes from across a Redis restart. Readers wait on the
    process's one :class:`~tavernkit.server.redis_fanout.StreamFanout`, not on a connection
    each."""

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        prefix: str = "tk:",
        block_ms: int = 2000,
        open_ttl_s: float = 300.0,
        missing_s: float = 30.0,
    ):
        self._redis = client
        self._where = _where(client)
        self._prefix = prefix
        #: the TTL of a running turn's log, set at its start and renewed by :meth:`keep_open`
        #: while it runs (and by single appends): a process that dies mid-turn never closes
        #: its log, which then goes this long after its last sign of life, not a day later
        self._open_ttl_ms = _ms(open_ttl_s)
        self._fanout = StreamFanout(
            client,
            prefix=prefix,
            is_end=lambda fields: fields.get("type") == _CLOSED,
            block_ms=block_ms,
            missing_s=missing_s,
        )
        #: turn -> (its first event's ms, the last number given) for the turns this process
        #: writes
        self._numbers: dict[str, tuple[int, int]] = {}
        self._group = GroupWrite(client, lambda: _guard(self._where))

    @property
    def fanout(self) -> StreamFanout:
        return self._fanout

    def _key(self, turn_id: str) -> str:
        return f"{self._prefix}turn:{_part(turn_id)}"

    def _next_id(self, turn_id: str) -> str:
        start, n = self._numbers.get(turn_id) or (int(time.time() * 1000), 0)
        self._numbers[turn_id] = (start, n + 1)
        return f"{start}-{n + 1}"

    async def append(self, turn_id: str, type: str, data: Mapping[str, Any]) -> str:
        if type == _CLOSED:
            raise ValueError(f"{type!r} is not an event type")
        fields = _fields(type, data)
        if turn_id in self._numbers:
            return await self._add(turn_id, self._next_id(turn_id), fields, self._open_ttl_ms)
        if type == "notice" and data.get("kind") == "started":
            # a turn of this process: its readers here get its events as they are written
            self._fanout.own(self._key(turn_id))
            try:
                return await self._add(turn_id, self._next_id(turn_id), fields, self._open_ttl_ms)
            except BaseException:
                await self._fanout.disown(self._key(turn_id))
                raise
        # a turn another process ran (a reader closing an orphan's log): Redis numbers it
        return await self._add(turn_id, "*", fields, self._open_ttl_ms)

    async def append_batch(
        self,
        turn_id: str,
        events: Sequence[tuple[str, Mapping[str, Any]]],
        *,
        close_ttl_s: float | None = None,
    ) -> None:
        """Append ``events`` (of a turn this process runs) in one round trip, one ``XADD``
        each; with ``close_ttl_s``, then close the log in the same round trip (as
        :meth:`close`: a turn's last batch and its end are one write, not two). Their ids are
        numbered again when the batch fails, so the same batch tried again is refused where
        an earlier try landed instead of written twice. The log's expiry is not renewed here:
        the turn's start set it, and the running turn renews it (:meth:`keep_open`, every
        third of a lock lease) and its close sets the last one."""
        if not events and close_ttl_s is None:
            return
        if any(type == _CLOSED for type, _ in events):
            raise ValueError(f"{_CLOSED!r} is not an event type")
        before = self._numbers.get(turn_id)
        ids = [self._next_id(turn_id) for _ in events]
        written = [(i, _str_fields(t, d)) for i, (t, d) in zip(ids, events, strict=True)]
        if close_ttl_s is not None:
            written.append((self._next_id(turn_id), _CLOSED_FIELDS))
        key = self._key(turn_id)
        commands: list[Command] = [
            ("xadd", (key, _entry(fields)), {"id": event_id}) for event_id, fields in written
        ]
        if close_ttl_s is not None:
            commands.append(("pexpire", (key, _ms(close_ttl_s)), {}))
        try:
            # in one pipeline with the other turns' batches of this turn of the loop
            replies = await self._group.send(commands)
        except BaseException:
            self._renumber(turn_id, before)
            raise
        for reply in replies:
            if isinstance(reply, ResponseError) and "equal or smaller" not in str(reply):
                self._renumber(turn_id, before)
                raise CoordinationError(f"Redis at {self._where}: {reply}")
        self._fanout.publish(key, written)
        if close_ttl_s is not None:
            await self._fanout.disown(key)
            self._numbers.pop(turn_id, None)

    def _renumber(self, turn_id: str, before: tuple[int, int] | None) -> None:
        if before is None:
            self._numbers.pop(turn_id, None)
        else:
            self._numbers[turn_id] = before

    async def _add(
        self, turn_id: str, event_id: str, fields: dict[FieldT, EncodableT], ttl_ms: int
    ) -> str:
        key = self._key(turn_id)
        # with the other turns' writes of this turn of the loop (a turn's start beside the
        # pieces of those streaming), not a MULTI of its own: the entry and its expiry go in
        # one write to Redis, which runs them one after the other
        added, _ = await self._group.send(
            [("xadd", (key, fields), {"id": event_id}), ("pexpire", (key, ttl_ms), {})]
        )
        # "equal or smaller" for our own id: written already, an earlier try's reply was lost
        if isinstance(added, ResponseError) and (
            event_id == "*" or "equal or smaller" not in str(added)
        ):
            raise CoordinationError(f"Redis at {self._where}: {added}")
        if event_id == "*":
            return _text(added)
        self._fanout.publish(key, [(event_id, {str(k): str(v) for k, v in fields.items()})])
        return event_id

    async def keep_open(self, turn_id: str) -> None:
        """The turn still runs (its model may be slow to answer): its log stays for another
        ``open_ttl_s``."""
        async with _guard(self._where):
            await self._redis.pexpire(self._key(turn_id), self._open_ttl_ms)

    async def close(self, turn_id: str, *, ttl_s: float) -> None:
        event_id = self._next_id(turn_id) if turn_id in self._numbers else "*"
        try:
            await self._add(turn_id, event_id, _entry(_CLOSED_FIELDS), _ms(ttl_s))
        finally:
            # written (its readers here have the end marker) or not (they go back to the
            # blocking read, which also sees a log that expired without its end)
            await self._fanout.disown(self._key(turn_id))
        self._numbers.pop(turn_id, None)

    def read(self, turn_id: str, after: str | None = None) -> AsyncIterator[TurnEvent]:
        if after is not None and not _EVENT_ID.fullmatch(after):
            raise ValueError(f"not an event id: {after!r}")
        return self._read(self._key(turn_id), turn_id, after or "0-0")

    async def _read(self, key: str, turn_id: str, last: str) -> AsyncIterator[TurnEvent]:
        # a turn this process writes has its log (its start was written first): no EXISTS
        if turn_id not in self._numbers:
            async with _guard(self._where):
                known = await self._redis.exists(key)
            if not known:
                raise KeyError(turn_id)
        reader = await self._fanout.join(key, last)
        try:
            while (entries := await reader.next()) is not None:
                for entry_id, values in entries:
                    if values.get("type") == _CLOSED:
                        return
                    yield TurnEvent(
                        id=entry_id, type=values["type"], data=json.loads(values["data"])
                    )
        finally:
            self._fanout.leave(reader)

    async def end_readers(self, *, within_s: float) -> None:
        """Shutting down: let this process's readers take the events already written for
        up to ``within_s``, then end the rest (each gets a ``CoordinationError``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        while self._fanout.readers and loop.time() < deadline:
            await asyncio.sleep(0.02)
        await self._fanout.aclose()

    async def aclose(self) -> None:
        await self._fanout.aclose()


#: KEYS[1] the lock; ARGV[1] the holder, ARGV[2] the lease in ms. A lock nobody holds is
#: taken again: a restarted Redis lost it, and no other turn can have the chat meanwhile
_RENEW = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
    return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if not holder then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    return 1
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisChatLock:
    """:class:`~tavernkit.server.coordination.ChatLock` with a lease, in Redis. Renewing a
    lock that nobody holds (it expired, or a restarted Redis lost it) takes it again."""

    def __init__(self, client: aioredis.Redis, *, prefix: str = "tk:") -> None:
        self._redis = client
        self._where = _where(client)
        self._prefix = prefix
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)

    def _key(self, chat_id: str) -> str:
        return f"{self._prefix}chatlock:{_part(chat_id)}"

    async def acquire(self, chat_id: str, holder: str, *, lease_s: float) -> bool:
        key = self._key(chat_id)
        async with _guard(self._where):
            if await self._redis.set(key, holder, nx=True, px=_ms(lease_s)):
                return True
            # a SET retried after its reply was lost finds the lock it took: ours
            return _text(await self._redis.get(key) or b"") == holder

    async def renew(self, chat_id: str, holder: str, *, lease_s: float) -> bool:
        async with _guard(self._where):
            return bool(await self._renew(keys=[self._key(chat_id)], args=[holder, _ms(lease_s)]))

    async def release(self, chat_id: str, holder: str) -> None:
        async with _guard(self._where):
            await self._release(keys=[self._key(chat_id)], args=[holder])

    async def holder(self, chat_id: str) -> str | None:
        async with _guard(self._where):
            value = await self._redis.get(self._key(chat_id))
        return None if value is None else _text(value)


#: KEYS[1] the window's sorted set; ARGV[1] limit, ARGV[2] window in ms, ARGV[3] a unique
#: member. Returns {allowed (0/1), ms until the next hit would be allowed}.
_HIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count < limit then
    redis.call('ZADD', KEYS[1], now, ARGV[3])
    redis.call('PEXPIRE', KEYS[1], window)
    return {1, 0}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local wait = window
if oldest[2] then
    wait = tonumber(oldest[2]) + window - now
end
return {0, math.max(wait, 1)}
"""


class RedisRateLimiter:
    """:class:`~tavernkit.server.coordination.RateLimiter`: a sliding window per key."""

    def __init__(self, client: aioredis.Redis, *, prefix: str = "tk:") -> None:
        self._prefix = prefix
        self._where = _where(client)
        self._hit = client.register_script(_HIT)

    async def hit(self, key: str, *, limit: int, window_s: float) -> RateDecision:
        if limit < 1 or window_s <= 0:
            raise ValueError(f"a rate limit needs limit >= 1, window_s > 0: {limit}, {window_s}")
        async with _guard(self._where):
            allowed, wait_ms = await self._hit(
                keys=[f"{self._prefix}rate:{_part(key)}"],
                args=[limit, _ms(window_s), uuid.uuid4().hex],
            )
        if allowed:
            return RateDecision(True)
        return RateDecision(False, retry_after_s=int(wait_ms) / 1000)


class RedisCooldownStore:
    """:class:`~tavernkit.generation.keys.CooldownStore` shared by every process. Statuses
    carry epoch seconds (the key pool's clock must be ``time.time``), so every process reads
    one cooldown the same way; each expires ``keep_s`` after its last write."""

    def __init__(
        self, client: aioredis.Redis, *, prefix: str = "tk:", keep_s: float = 30 * 86400
    ) -> None:
        self._redis = client
        self._where = _where(client)
        self._prefix = prefix
        self._keep_ms = _ms(keep_s)

    def _key(self, owner: str, provider: str, key_id: str, model: str) -> str:
        key = f"{self._prefix}keystate:{_part(owner)}:{_part(provider)}:{_part(key_id)}"
        # a key's rest for one model beside its own record (``model=""``: the key's own)
        return f"{key}:{_part(model)}" if model else key

    async def get(self, owner: str, provider: str, key_id: str, model: str = "") -> KeyStatus:
        async with _guard(self._where):
            raw = await self._redis.get(self._key(owner, provider, key_id, model))
        if raw is None:
            return KeyStatus(key_id)
        fields = json.loads(_text(raw))
        return KeyStatus(**{**fields, "key_id": key_id})

    async def put(self, owner: str, provider: str, status: KeyStatus, model: str = "") -> None:
        async with _guard(self._where):
            await self._redis.set(
                self._key(owner, provider, status.key_id, model),
                json.dumps(asdict(status), separators=(",", ":")),
                px=self._keep_ms,
            )


class RedisTurnStops:
    """:class:`~tavernkit.server.coordination.TurnStops` on one Redis pub/sub channel. The
    subscription outlives Redis restarts: when it breaks it is made again (backoff from
    50 ms to 2 s), so stop requests reach this process again as soon as Redis is back."""

    def __init__(self, client: aioredis.Redis, *, prefix: str = "tk:") -> None:
        self._redis = client
        self._where = _where(client)
        self._channel = f"{prefix}turnstop"

    async def request(self, turn_id: str) -> None:
        async with _guard(self._where):
            await self._redis.publish(self._channel, turn_id)

    async def run(
        self, on_stop: Callable[[str], object], *, ready: asyncio.Event | None = None
    ) -> None:
        await subscribe_forever(self._redis, self._channel, on_stop, ready=ready)


async def subscribe_forever(
    client: aioredis.Redis,
    channel: str,
    on_message: Callable[[str], object],
    *,
    ready: asyncio.Event | None = None,
) -> None:
    """Call ``on_message`` with every message on ``channel`` until cancelled; sets ``ready``
    once subscribed. The first subscription failing raises
    :class:`~tavernkit.errors.CoordinationError` (the start's check that Redis answers); a
    later break subscribes again (backoff from 50 ms to 2 s), so messages reach this process
    again as soon as Redis is back."""
    backoff = 0.05
    subscribed = asyncio.Event() if ready is None else ready
    while True:
        try:
            await _subscribed(client, channel, on_message, subscribed)
        except (RedisError, OSError) as exc:
            if not subscribed.is_set():
                raise CoordinationError(f"Redis at {_where(client)}: {exc}") from exc
            logger.warning(
                "the subscription to %s broke (%s); subscribing again",
                channel,
                type(exc).__name__,
            )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)
        else:  # pragma: no cover - _subscribed only returns by raising
            return


async def _subscribed(
    client: aioredis.Redis,
    channel: str,
    on_message: Callable[[str], object],
    ready: asyncio.Event,
) -> None:
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    try:
        await pubsub.subscribe(channel)
        ready.set()
        while True:
            message = await pubsub.get_message(timeout=None)
            if message is not None and message.get("type") == "message":
                on_message(_text(message["data"]))
    finally:
        with contextlib.suppress(RedisError, OSError):
            await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]  # typed from redis 8


@dataclass(frozen=True, slots=True)
class RedisCoordination:
    """The five shared parts on one Redis connection pool; :meth:`aclose` closes it."""

    client: aioredis.Redis
    events: RedisTurnEventLog
    locks: RedisChatLock
    rate_limiter: RedisRateLimiter
    cooldowns: RedisCooldownStore
    stops: RedisTurnStops

    async def aclose(self) -> None:
        await self.events.aclose()
        await self.client.aclose()


#: connections of a process's Redis pool (``serve --redis-pool``). What holds one: the
#: readers' one blocking read and the stop subscription, each for good, and every command
#: for its round trip (~0.1-1 ms): a process's 500 streams of 20 pieces a second are ~10,000
#: commands a second, which a few connections carry; more commands than connections wait for
#: one (up to ``REDIS_POOL_WAIT_S``) instead of failing
DEFAULT_REDIS_POOL = 64
#: how long a command may take before its connection counts as broken (and it is retried)
SOCKET_TIMEOUT_S = 10.0
#: how long a command waits for a free connection of the pool before it fails (then a turn's
#: start answers 503 with Retry-After)
REDIS_POOL_WAIT_S = 5.0


def redis_client(
    redis_url: str,
    *,
    max_connections: int = DEFAULT_REDIS_POOL,
    wait_s: float = REDIS_POOL_WAIT_S,
) -> aioredis.Redis:
    """A client of the server at ``redis_url`` on a pool of at most ``max_connections``
    (a ``max_connections`` in the URL's query wins) where a command waits up to ``wait_s``
    for a free connection, and a command whose connection broke is tried again on a new one
    (3 times, 50 ms doubling to 500 ms: a restarted Redis is reached as soon as it is back)."""
    pool = aioredis.BlockingConnectionPool.from_url(
        redis_url,
        max_connections=max_connections,
        timeout=wait_s,
        socket_connect_timeout=5.0,
        # redis-py's default read timeout is 5 s; the readers' blocking read waits 2 s, which
        # a loaded machine must not push past it
        socket_timeout=SOCKET_TIMEOUT_S,
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), retries=3),
        retry_on_error=[RedisConnectionError, RedisTimeoutError],
    )
    return aioredis.Redis.from_pool(pool)  # closing the client closes its pool


def coordination_from_url(
    redis_url: str,
    *,
    prefix: str = "tk:",
    max_connections: int = DEFAULT_REDIS_POOL,
    wait_s: float = REDIS_POOL_WAIT_S,
) -> RedisCoordination:
    """The Redis implementations of the server's shared parts, on the server at
    ``redis_url`` (``redis://host:port/db``), on one pool (:func:`redis_client`). Nothing
    connects until the first call."""
    client = redis_client(redis_url, max_connections=max_connections, wait_s=wait_s)
    return RedisCoordination(
        client=client,
        events=RedisTurnEventLog(client, prefix=prefix),
        locks=RedisChatLock(client, prefix=prefix),
        rate_limiter=RedisRateLimiter(client, prefix=prefix),
        cooldowns=RedisCooldownStore(client, prefix=prefix),
        stops=RedisTurnStops(client, prefix=prefix),
    )


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value
