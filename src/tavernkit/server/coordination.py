"""What the processes of one server share, as protocols: the chat turn lock, the turn event log
and the rate limiter. One process uses the in-memory implementations; several processes use
the Redis ones (issue 20), so a turn started through one process is resumed through another
and a chat has one generation across all of them; :class:`TurnStops` carries a stop
(``DELETE`` of a turn, an ``interrupt``) to the process that runs the turn. Key cooldowns
already have their protocol (:class:`tavernkit.generation.keys.CooldownStore`).

Each implementation is tested against the same behaviour; the server holds only these types.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "DEFAULT_LOCK_LEASE_S",
    "ChatLock",
    "RateDecision",
    "RateLimiter",
    "TurnEvent",
    "TurnEventLog",
    "TurnStops",
]

#: the chat lock's lease by default (``serve --lock-lease``): a process killed mid-turn frees
#: its chat within it (renewed every third of it, a renewal may come ~5 s late on a loaded
#: machine), and its readers learn it two orphan checks (a quarter lease each) later
DEFAULT_LOCK_LEASE_S = 8.0


@dataclass(frozen=True, slots=True)
class TurnEvent:
    """One event of a turn as clients see it: ``id`` is the log's (strictly increasing within
    a turn, usable as SSE ``id`` / ``Last-Event-ID``), ``type`` one of text, reasoning, tool,
    notice, done, error; ``data`` JSON-able."""

    id: str
    type: str
    data: Mapping[str, Any]


class TurnEventLog(Protocol):
    async def append(self, turn_id: str, type: str, data: Mapping[str, Any]) -> str:
        """Append one event; its id."""
        ...

    async def close(self, turn_id: str, *, ttl_s: float) -> None:
        """No more events for ``turn_id``; readers end after the last one. The log is kept
        ``ttl_s`` seconds for late reconnects, then dropped."""
        ...

    def read(self, turn_id: str, after: str | None = None) -> AsyncIterator[TurnEvent]:
        """The events after id ``after`` (all when None), then live ones as they are appended,
        ending when the turn's log is closed. Unknown turn: raises ``KeyError``."""
        ...


class ChatLock(Protocol):
    async def acquire(self, chat_id: str, holder: str, *, lease_s: float) -> bool:
        """Take the chat's turn lock for ``holder`` (false when another holds it). The lease
        ends by itself after ``lease_s`` unless renewed: a crashed holder cannot keep it."""
        ...

    async def renew(self, chat_id: str, holder: str, *, lease_s: float) -> bool:
        """Extend the lease; false when ``holder`` no longer holds it."""
        ...

    async def release(self, chat_id: str, holder: str) -> None:
        """Release it if ``holder`` still holds it (never another holder's lock)."""
        ...

    async def holder(self, chat_id: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class RateDecision:
    allowed: bool
    #: seconds until the next call would be allowed (0 when allowed)
    retry_after_s: float = 0.0


class RateLimiter(Protocol):
    async def hit(self, key: str, *, limit: int, window_s: float) -> RateDecision:
        """Count one event for ``key`` (e.g. ``turns:<user>``, ``login:<name>``) against at
        most ``limit`` per ``window_s``."""
        ...


class TurnStops(Protocol):
    """Stop requests between processes: a process asks, the one running the turn stops it
    (one process needs none: it stops its own turns directly)."""

    async def request(self, turn_id: str) -> None:
        """Ask every process to stop ``turn_id`` (the one running it does; others ignore it)."""
        ...

    async def run(
        self, on_stop: Callable[[str], object], *, ready: asyncio.Event | None = None
    ) -> None:
        """Call ``on_stop(turn_id)`` for every request from now on, until cancelled; sets
        ``ready`` once requests are being received."""
        ...
