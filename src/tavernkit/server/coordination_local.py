"""The in-memory :class:`~tavernkit.server.coordination.TurnEventLog` and
:class:`~tavernkit.server.coordination.ChatLock` of a one-process server (the Redis ones are
for several processes).

The event log keeps each turn's events in a list; event ids are the 1-based position as a
decimal string, so ``Last-Event-ID: 7`` resumes with the eighth event. A reader waits on one
:class:`asyncio.Event` per turn, replaced at every append, so a live reader costs no polling
and an append wakes every reader of that turn at once. Closed logs are dropped ``ttl_s``
seconds after :meth:`~InMemoryTurnEventLog.close`.

The lock's lease is measured on ``clock`` (monotonic by default), so a holder that stopped
renewing loses the chat after ``lease_s`` even if it never released it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tavernkit.server.coordination import TurnEvent

__all__ = ["InMemoryChatLock", "InMemoryTurnEventLog"]


@dataclass
class _TurnLog:
    events: list[TurnEvent] = field(default_factory=list)
    closed: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class InMemoryTurnEventLog:
    """Every turn's events in this process's memory (see the module docstring)."""

    def __init__(self) -> None:
        self._logs: dict[str, _TurnLog] = {}
        self._drops: dict[str, asyncio.TimerHandle] = {}

    def _log(self, turn_id: str) -> _TurnLog:
        log = self._logs.get(turn_id)
        if log is None:
            raise KeyError(turn_id)
        return log

    async def append(self, turn_id: str, type: str, data: Mapping[str, Any]) -> str:
        return self.append_nowait(turn_id, type, data)

    def append_nowait(self, turn_id: str, type: str, data: Mapping[str, Any]) -> str:
        """:meth:`append` without a coroutine (memory never blocks): what a turn's sink calls
        in place for every piece."""
        log = self._logs.get(turn_id)
        if log is None:
            log = self._logs[turn_id] = _TurnLog()
        if log.closed:
            raise ValueError(f"the event log of turn {turn_id!r} is closed")
        event_id = str(len(log.events) + 1)
        log.events.append(TurnEvent(event_id, type, data))
        self._wake(log)
        return event_id

    async def close(self, turn_id: str, *, ttl_s: float) -> None:
        log = self._logs.get(turn_id)
        if log is None:
            log = self._logs[turn_id] = _TurnLog()
        log.closed = True
        self._wake(log)
        old = self._drops.pop(turn_id, None)
        if old is not None:
            old.cancel()
        self._drops[turn_id] = asyncio.get_running_loop().call_later(ttl_s, self._drop, turn_id)

    def _drop(self, turn_id: str) -> None:
        self._drops.pop(turn_id, None)
        self._logs.pop(turn_id, None)

    @staticmethod
    def _wake(log: _TurnLog) -> None:
        # readers hold the old event; a fresh one is what the next wait blocks on
        changed, log.changed = log.changed, asyncio.Event()
        changed.set()

    def read(self, turn_id: str, after: str | None = None) -> AsyncIterator[TurnEvent]:
        log = self._log(turn_id)  # unknown turn: KeyError now, not at the first iteration
        start = _position_after(after)
        return self._read(log, start)

    async def _read(self, log: _TurnLog, start: int) -> AsyncIterator[TurnEvent]:
        position = start
        while True:
            while position < len(log.events):
                yield log.events[position]
                position += 1
            if log.closed:
                return
            await log.changed.wait()

    def known(self, turn_id: str) -> bool:
        return turn_id in self._logs


def _position_after(after: str | None) -> int:
    """The list index of the first event after id ``after``."""
    if after is None or after == "":
        return 0
    if not after.isdigit():
        raise ValueError(f"not an event id of this log: {after!r}")
    return int(after)


@dataclass
class _Lease:
    holder: str
    until: float


class InMemoryChatLock:
    """Per-chat leases in this process's memory (see the module docstring)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._leases: dict[str, _Lease] = {}

    def _current(self, chat_id: str) -> _Lease | None:
        lease = self._leases.get(chat_id)
        if lease is not None and lease.until <= self._clock():
            del self._leases[chat_id]
            return None
        return lease

    async def acquire(self, chat_id: str, holder: str, *, lease_s: float) -> bool:
        lease = self._current(chat_id)
        if lease is not None and lease.holder != holder:
            return False
        self._leases[chat_id] = _Lease(holder, self._clock() + lease_s)
        return True

    async def renew(self, chat_id: str, holder: str, *, lease_s: float) -> bool:
        lease = self._current(chat_id)
        if lease is None or lease.holder != holder:
            return False
        lease.until = self._clock() + lease_s
        return True

    async def release(self, chat_id: str, holder: str) -> None:
        lease = self._current(chat_id)
        if lease is not None and lease.holder == holder:
            del self._leases[chat_id]

    async def holder(self, chat_id: str) -> str | None:
        lease = self._current(chat_id)
        return lease.holder if lease is not None else None
