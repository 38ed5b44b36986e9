"""The Redis implementations of what server processes share, against a real redis-server
(tests/_services.py). Each "process" is its own client with its own connections, built by
``coordination_from_url`` as a server process builds it."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
import redis.asyncio
from redis.exceptions import RedisError, ResponseError

from tavernkit.errors import CoordinationError, Overloaded, RateLimited
from tavernkit.generation.keys import KeyPool, KeyStatus, PoolKey
from tavernkit.server.coordination import TurnEvent
from tavernkit.server.redis_coordination import (
    RedisCoordination,
    RedisTurnEventLog,
    coordination_from_url,
)
from tavernkit.server.redis_log_batches import GroupWrite
from tavernkit.server.turn_log_writer import TurnLogWriter

SECRET = "Q9f8e7d6c5b4a3210ZYXWVUTSRQ"


@pytest.fixture
async def two(redis_url: str) -> AsyncIterator[tuple[RedisCoordination, RedisCoordination]]:
    a, b = coordination_from_url(redis_url), coordination_from_url(redis_url)
    try:
        yield a, b
    finally:
        await a.aclose()
        await b.aclose()


async def _collect(events: AsyncIterator[TurnEvent]) -> list[TurnEvent]:
    return [e async for e in events]


# -- turn event log ----------------------------------------------------------------------------
async def test_a_turn_written_by_one_process_is_read_and_resumed_through_another(
    two: tuple[RedisCoordination, RedisCoordination],
) -> None:
    a, b = two
    ids = [await a.events.append("t1", "text", {"delta": f"chunk {i} é"}) for i in range(3)]
    assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))
    assert len(set(ids)) == 3
    reader = asyncio.create_task(_collect(b.events.read("t1")))
    resumed = asyncio.create_task(_collect(b.events.read("t1", after=ids[1])))
    await asyncio.sleep(0.05)
    assert not reader.done()  # waits for live events
    live = await a.events.append("t1", "done", {"finish": "stop"})
    await a.events.close("t1", ttl_s=30)
    everything = await asyncio.wait_for(reader, 5)
    assert [(e.id, e.type, dict(e.data)) for e in everything] == [
        (ids[0], "text", {"delta": "chunk 0 é"}),
        (ids[1], "text", {"delta": "chunk 1 é"}),
        (ids[2], "text", {"delta": "chunk 2 é"}),
        (live, "done", {"finish": "stop"}),
    ]
    assert [e.id for e in await asyncio.wait_for(resumed, 5)] == [ids[2], live]
    # a reconnect after the end replays from its id and ends
    assert [e.id for e in await _collect(a.events.read("t1", after=ids[2]))] == [live]


async def test_a_second_client_joins_a_turn_live(
    two: tuple[RedisCoordination, RedisCoordination],
) -> None:
    a, b = two
    await a.events.append("t2", "text", {"delta": "a"})
    first = asyncio.create_task(_collect(a.events.read("t2")))
    second = asyncio.create_task(_collect(b.events.read("t2")))
    await asyncio.sleep(0.05)
    for text in "bcd":
        await a.events.append("t2", "text", {"delta": text})
        await asyncio.sleep(0.01)
    await b.events.close("t2", ttl_s=30)  # any process may close it
    one, other = await asyncio.wait_for(asyncio.gather(first, second), 5)
    assert [e.data["delta"] for e in one] == list("abcd")
    assert one == other


async def test_readers_of_a_turn_this_process_writes_get_it_as_written_whenever_they_join(
    two: tuple[RedisCoordination, RedisCoordination],
) -> None:
    """A turn this process runs (its log starts with the ``started`` notice) reaches its
    readers here from the writes themselves, not read back: a reader that joins midway, while
    batches go on, gets the past from the process and every event once, in order; a reader
    through another process reads it from Redis, the same."""
    a, b = two
    started = await a.events.append("t9", "notice", {"kind": "started"})
    early = asyncio.create_task(_collect(a.events.read("t9")))
    remote = asyncio.create_task(_collect(b.events.read("t9")))
    await asyncio.sleep(0.05)
    late: list[asyncio.Task[list[TurnEvent]]] = []
    pieces = []
    for n in range(12):
        batch = [("text", {"text": f"{n}a"}), ("text", {"text": f"{n}b"})]
        pieces += [f"{n}a", f"{n}b"]
        if n % 4 == 1:  # joins now, while the next batch is written
            late.append(asyncio.create_task(_collect(a.events.read("t9", after=started))))
            await asyncio.sleep(0)
        await a.events.append_batch("t9", batch)
    await a.events.close("t9", ttl_s=30)
    everything = await asyncio.wait_for(early, 5)
    assert [e.type for e in everything] == ["notice"] + ["text"] * 24
    assert [e.data["text"] for e in everything[1:]] == pieces
    assert await asyncio.wait_for(remote, 5) == everything
    for joined in late:
        assert await asyncio.wait_for(joined, 5) == everything[1:]
    # after its end a reader here reads the log from Redis, as any process does
    assert await _collect(a.events.read("t9")) == everything


async def test_a_turns_last_batch_closes_its_log_in_the_same_write(
    two: tuple[RedisCoordination, RedisCoordination], redis_url: str
) -> None:
    """``append_batch(..., close_ttl_s=...)``: the last events and the log's end in one round
    trip; readers here and in another process end there, and the log keeps that TTL."""
    a, b = two
    await a.events.append("t8", "notice", {"kind": "started"})
    here = asyncio.create_task(_collect(a.events.read("t8")))
    there = asyncio.create_task(_collect(b.events.read("t8")))
    await asyncio.sleep(0.05)
    await a.events.append_batch("t8", [("text", {"text": "x"})])
    counter = redis.asyncio.Redis.from_url(redis_url)
    try:
        before = await counter.info("commandstats")
        await a.events.append_batch(
            "t8", [("text", {"text": "y"}), ("done", {"status": "completed"})], close_ttl_s=30
        )
        after = await counter.info("commandstats")
        ttl = await counter.pttl("tk:turn:t8")
    finally:
        await counter.aclose()
    sent = {
        name: after.get(name, {"calls": 0})["calls"] - before.get(name, {"calls": 0})["calls"]
        for name in ("cmdstat_xadd", "cmdstat_pexpire", "cmdstat_multi")
    }
    # the two events, the end's entry and its TTL, in one pipeline (no MULTI of its own)
    assert sent == {"cmdstat_xadd": 3, "cmdstat_pexpire": 1, "cmdstat_multi": 0}
    assert 25_000 < ttl <= 30_000
    events = await asyncio.wait_for(here, 5)
    assert [e.type for e in events] == ["notice", "text", "text", "done"]
    assert await asyncio.wait_for(there, 5) == events
    assert await _collect(b.events.read("t8")) == events
    with pytest.raises(ValueError):
        await a.events.append_batch("t8", [("__closed__", {})])


async def test_unknown_turns_bad_ids_and_the_ttl(
    two: tuple[RedisCoordination, RedisCoordination],
) -> None:
    a, b = two
    with pytest.raises(KeyError):
        await _collect(b.events.read("never"))
    with pytest.raises(ValueError, match="not an event id"):
        b.events.read("t3", after="1-0; FLUSHALL")
    with pytest.raises(ValueError):
        await a.events.append("t3", "__closed__", {})
    await a.events.append("t3", "text", {"delta": "x"})
    await a.events.close("t3", ttl_s=0.2)
    assert len(await _collect(b.events.read("t3"))) == 1
    await asyncio.sleep(0.35)
    with pytest.raises(KeyError):  # dropped after its TTL
        await _collect(b.events.read("t3"))


async def test_a_log_its_process_never_closed_expires_and_its_readers_end(
    redis_url: str,
) -> None:
    client = redis.asyncio.Redis.from_url(redis_url)
    crashed = RedisTurnEventLog(client, block_ms=50, open_ttl_s=0.3, missing_s=0.2)
    try:
        await crashed.append("t4", "text", {"delta": "half a rep"})  # then the process dies
        reader = asyncio.create_task(_collect(crashed.read("t4")))
        events = await asyncio.wait_for(reader, 5)  # ends once the log expired
        assert [e.data["delta"] for e in events] == ["half a rep"]
        with pytest.raises(KeyError):
            await _collect(crashed.read("t4"))
    finally:
        await crashed.aclose()
        await client.aclose()


# -- chat lock -----------------------------------------------------------------------------------
async def test_one_holder_per_chat_across_processes(
    two: tuple[RedisCoordination, RedisCoordination],
) -> None:
    a, b = two
    assert await a.locks.acquire("c1", "proc-a", lease_s=10)
    assert not await b.locks.acquire("c1", "proc-b", lease_s=10)
    assert await b.locks.holder("c1") == "proc-a"
    await b.locks.release("c1", "proc-b")  # not its lock: nothing happens
    assert not await b.locks.renew("c1", "proc-b", lease_s=10)
    assert await b.locks.holder("c1") == "proc-a"
    assert await a.locks.renew("c1", "proc-a", lease_s=10)
    await a.locks.release("c1", "proc-a")
    assert await b.locks.holder("c1") is None
    assert await b.locks.acquire("c1", "proc-b", lease_s=10)
    # two processes racing for a free chat: exactly one wins
    wins = await asyncio.gather(
        *(
            p.locks.acquire("c2", f"{name}{i}", lease_s=10)
            for i in range(5)
            for name, p in (("a", a), ("b", b))
        )
    )
    assert wins.count(True) == 1
    # the holder asking again (a SET retried after its reply was lost) holds it still
    winner = await a.locks.holder("c2")
    assert winner is not None and await b.locks.acquire("c2", winner, lease_s=10)


async def test_a_crashed_holders_lease_ends_and_a_renewed_one_does_not(
    two: tuple[RedisCoordination, RedisCoordination],
) -> None:
    a, b = two
    assert await a.locks.acquire("crash", "proc-a", lease_s=0.2)  # then "crashes"
    assert await a.locks.acquire("alive", "proc-a", lease_s=0.3)
    await asyncio.sleep(0.15)
    assert await a.locks.renew("alive", "proc-a", lease_s=1)
    await asyncio.sleep(0.25)
    assert await b.locks.holder("crash") is None
    assert await b.locks.acquire("crash", "proc-b", lease_s=10)
    assert await b.locks.holder("alive") == "proc-a"
    assert not await a.locks.renew("crash", "proc-a", lease_s=10)  # it lost the lock


# -- rate limiter --------------------------------------------------------------------------------
async def test_a_rate_limit_counts_the_hits_of_every_process(
    two: tuple[RedisCoordination, RedisCoordination],
) -> None:
    a, b = two
    decisions = [await p.rate_limiter.hit("turns:ann", limit=3, window_s=0.4) for p in (a, b, a)]
    assert all(d.allowed for d in decisions)
    denied = await b.rate_limiter.hit("turns:ann", limit=3, window_s=0.4)
    assert not denied.allowed and 0 < denied.retry_after_s <= 0.4
    assert (await a.rate_limiter.hit("turns:bob", limit=3, window_s=0.4)).allowed
    await asyncio.sleep(denied.retry_after_s + 0.05)
    assert (await b.rate_limiter.hit("turns:ann", limit=3, window_s=0.4)).allowed
    with pytest.raises(ValueError):
        await a.rate_limiter.hit("x", limit=0, window_s=1)


# -- key cooldowns -------------------------------------------------------------------------------
async def test_a_429_seen_by_one_process_benches_the_key_for_all(
    two: tuple[RedisCoordination, RedisCoordination],
) -> None:
    a, b = two
    keys = [PoolKey("k1"), PoolKey("k2")]

    async def secret(key: PoolKey) -> str:
        return f"secret-{key.key_id}"

    pool_a, pool_b = (
        KeyPool("ann", "openai", keys, load_secret=secret, store=p.cooldowns, clock=time.time)
        for p in (a, b)
    )
    first = await pool_a.select()
    assert first is not None and first.key_id == "k1"
    cooled = await pool_a.record_failure(first, RateLimited("slow down", status=429))
    assert cooled is not None and cooled >= 60
    picked = await pool_b.select()
    assert picked is not None and picked.key_id == "k2"  # b skips the key a saw fail
    status = await b.cooldowns.get("ann", "openai", "k1")
    assert status.error_class == "rate_limit" and status.failures == 1
    assert status.cooldown_until is not None and status.cooldown_until > time.time() + 50
    # another owner's key of the same id is another key
    assert await b.cooldowns.get("bob", "openai", "k1") == KeyStatus("k1")
    await pool_b.record_success(picked)
    assert (await a.cooldowns.get("ann", "openai", "k2")).uses == 1


async def test_a_server_error_rests_the_key_for_its_model_in_every_process(
    two: tuple[RedisCoordination, RedisCoordination],
) -> None:
    a, b = two
    keys = [PoolKey("k1"), PoolKey("k2")]

    async def secret(key: PoolKey) -> str:
        return f"secret-{key.key_id}"

    def pool(p: RedisCoordination, model: str) -> KeyPool:
        store = p.cooldowns
        return KeyPool(
            "ann", "openai", keys, load_secret=secret, store=store, clock=time.time, model=model
        )

    rested = await pool(a, "model-a").record_failure(keys[0], Overloaded("down", status=503))
    assert rested == 300
    picked = await pool(b, "model-a").select()
    assert picked is not None and picked.key_id == "k2"  # b skips the key a saw fail
    # the rest is for model A only: for model B, k1 still serves
    picked = await pool(b, "model-b").select()
    assert picked is not None and picked.key_id == "k1"
    await pool(b, "model-b").record_success(keys[0])
    # the key's uses are its own: a counts b's success on model B, and k1 still rests on A
    assert (await a.cooldowns.get("ann", "openai", "k1")).uses == 1
    assert (await a.cooldowns.get("ann", "openai", "k1", "model-a")).error_class == "overloaded"


async def test_an_unreachable_redis_is_a_coordination_error_without_the_password() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = coordination_from_url(f"redis://:pw-{SECRET}@127.0.0.1:{port}/0")
    try:
        calls = [
            down.events.append("t", "text", {}),
            down.locks.acquire("c", "h", lease_s=1),
            down.rate_limiter.hit("k", limit=1, window_s=1),
            down.cooldowns.get("o", "p", "k"),
            _collect(down.events.read("t")),
        ]
        for call in calls:
            with pytest.raises(CoordinationError, match=f"127.0.0.1:{port}") as info:
                await call
            assert SECRET not in str(info.value)
    finally:
        await down.aclose()


# -- stop requests -----------------------------------------------------------------------------
async def test_a_stop_requested_through_one_process_reaches_every_subscriber(
    two: tuple[RedisCoordination, RedisCoordination],
) -> None:
    a, b = two
    seen: list[str] = []
    ready = asyncio.Event()
    listener = asyncio.create_task(b.stops.run(seen.append, ready=ready))
    try:
        await asyncio.wait_for(ready.wait(), 5)
        await a.stops.request("turn-1")
        await a.stops.request("turn/2 é")
        deadline = time.monotonic() + 5
        while len(seen) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert seen == ["turn-1", "turn/2 é"]
    finally:
        listener.cancel()
        with pytest.raises(asyncio.CancelledError):
            await listener


async def test_a_stop_subscription_to_an_unreachable_redis_is_a_coordination_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    nowhere = coordination_from_url(f"redis://:{SECRET}@127.0.0.1:{port}/0")
    try:
        with pytest.raises(CoordinationError) as caught:
            await nowhere.stops.run(lambda turn: None)
        assert f"127.0.0.1:{port}" in str(caught.value)
        assert SECRET not in str(caught.value)
    finally:
        await nowhere.aclose()


def _redis_errors() -> AbstractAsyncContextManager[None]:
    """What the coordination's own guard does: Redis's errors as CoordinationError."""
    return _Guarded()


class _Guarded:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if isinstance(exc, RedisError):
            raise CoordinationError(f"Redis: {type(exc).__name__}") from exc


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _CountedPipelines:
    """A real Redis client whose pipelines are counted (each is one round trip)."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self.client = client
        self.pipelines = 0

    def pipeline(self, **kwargs: Any) -> Any:
        self.pipelines += 1
        return self.client.pipeline(**kwargs)


async def test_turns_writing_at_once_share_one_pipeline(redis_url: str) -> None:
    """Batches of several turns queued in the same turn of the loop go as one pipeline; a
    refused entry fails its own turn's write alone; a lost connection fails every write of
    that pipeline (each writer then tries again)."""
    client = redis.asyncio.Redis.from_url(redis_url)
    counted = _CountedPipelines(client)
    group = GroupWrite(counted, lambda: _redis_errors())  # type: ignore[arg-type]
    try:
        await client.xadd("tk:test:old", {"a": "1"}, id="5-1")
        ok, refused, other = await asyncio.gather(
            group.send([("xadd", ("tk:test:g1", {"a": "1"}), {"id": "1-1"})]),
            group.send([("xadd", ("tk:test:old", {"a": "2"}), {"id": "1-1"})]),
            group.send([("set", ("tk:test:g2", "x"), {}), ("get", ("tk:test:g2",), {})]),
        )
        assert counted.pipelines == 1
        assert ok == [b"1-1"]
        assert isinstance(refused[0], ResponseError)  # an id below the stream's last
        assert other == [True, b"x"]
    finally:
        await client.aclose()
    gone = redis.asyncio.Redis(host="127.0.0.1", port=_closed_port(), socket_connect_timeout=1)
    broken = GroupWrite(gone, lambda: _redis_errors())
    results = await asyncio.gather(
        broken.send([("get", ("k",), {})]),
        broken.send([("get", ("j",), {})]),
        return_exceptions=True,
    )
    assert all(isinstance(r, CoordinationError) for r in results), results
    await gone.aclose()


async def test_two_turns_streaming_at_once_write_on_the_same_ticks(
    two: tuple[RedisCoordination, RedisCoordination], redis_url: str
) -> None:
    """Two turns' writers (started apart) write on one clock's ticks, so the log sends their
    batches together: fewer pipelines than writes."""
    a, _ = two
    log = a.events
    assert isinstance(log, RedisTurnEventLog)
    counted = _CountedPipelines(redis.asyncio.Redis.from_url(redis_url))
    log._group = GroupWrite(counted, lambda: _redis_errors())  # type: ignore[arg-type]
    writers = []
    for turn in ("s1", "s2"):
        await log.append(turn, "notice", {"kind": "started"})
        writers.append(TurnLogWriter(log, turn, window_s=0.05))
    starts = counted.pipelines  # the logs' starts went through the same pipeline

    async def stream(writer: TurnLogWriter) -> None:
        if writer is writers[1]:
            await asyncio.sleep(0.023)  # the second starts off the first's rhythm
        for n in range(30):
            writer.append_nowait("text", {"text": f"{n} "})
            await asyncio.sleep(0.01)
        await writer.finish([("done", {"status": "completed"})], ttl_s=30)

    await asyncio.gather(*(stream(w) for w in writers))
    await counted.client.aclose()
    writes = sum(w.writes for w in writers)
    assert counted.pipelines - starts < writes * 0.75, (counted.pipelines - starts, writes)
    for turn in ("s1", "s2"):
        events = await _collect(log.read(turn))
        assert "".join(e.data.get("text", "") for e in events) == "".join(
            f"{n} " for n in range(30)
        )
        assert events[-1].type == "done"
