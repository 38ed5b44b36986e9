"""The in-memory turn event log and chat lock: ids, resume, live readers, ttl, leases."""

from __future__ import annotations

import asyncio

import pytest

from tavernkit.server.coordination_local import InMemoryChatLock, InMemoryTurnEventLog


async def collect(log: InMemoryTurnEventLog, turn: str, after: str | None = None) -> list[str]:
    return [f"{e.id}:{e.type}:{e.data.get('text', '')}" async for e in log.read(turn, after)]


async def test_ids_increase_and_read_resumes_after_an_id() -> None:
    log = InMemoryTurnEventLog()
    ids = [await log.append("t", "text", {"text": w}) for w in ("a", "b", "c")]
    await log.close("t", ttl_s=60)
    assert ids == ["1", "2", "3"]
    assert await collect(log, "t") == ["1:text:a", "2:text:b", "3:text:c"]
    assert await collect(log, "t", "2") == ["3:text:c"]
    assert await collect(log, "t", "3") == []


async def test_a_live_reader_gets_events_as_they_come_and_ends_at_close() -> None:
    log = InMemoryTurnEventLog()
    await log.append("t", "text", {"text": "a"})
    readers = [asyncio.create_task(collect(log, "t")) for _ in range(3)]
    await asyncio.sleep(0)
    await log.append("t", "text", {"text": "b"})
    await asyncio.sleep(0)
    await log.append("t", "done", {})
    assert not any(r.done() for r in readers)  # still waiting for more until the close
    await log.close("t", ttl_s=60)
    for reader in readers:
        assert await reader == ["1:text:a", "2:text:b", "3:done:"]


async def test_unknown_turn_and_bad_ids_are_refused() -> None:
    log = InMemoryTurnEventLog()
    with pytest.raises(KeyError):
        log.read("nope")
    await log.append("t", "text", {"text": "a"})
    with pytest.raises(ValueError, match="not an event id"):
        log.read("t", "1-0")
    await log.close("t", ttl_s=60)
    with pytest.raises(ValueError, match="closed"):
        await log.append("t", "text", {"text": "late"})


async def test_a_closed_log_is_dropped_after_its_ttl() -> None:
    log = InMemoryTurnEventLog()
    await log.append("t", "done", {})
    await log.close("t", ttl_s=0.01)
    assert await collect(log, "t") == ["1:done:"]
    await asyncio.sleep(0.05)
    with pytest.raises(KeyError):
        log.read("t")


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_the_lock_has_one_holder_and_a_lease_that_ends() -> None:
    clock = FakeClock()
    lock = InMemoryChatLock(clock=clock)
    assert await lock.acquire("c", "a", lease_s=10)
    assert not await lock.acquire("c", "b", lease_s=10)
    assert await lock.holder("c") == "a"
    await lock.release("c", "b")  # never another holder's lock
    assert await lock.holder("c") == "a"
    clock.now += 9
    assert await lock.renew("c", "a", lease_s=10)
    clock.now += 9
    assert await lock.holder("c") == "a"  # renewed: still held
    clock.now += 2
    assert await lock.holder("c") is None  # the lease ran out: a crashed holder lets go
    assert not await lock.renew("c", "a", lease_s=10)
    assert await lock.acquire("c", "b", lease_s=10)
    await lock.release("c", "b")
    assert await lock.holder("c") is None
