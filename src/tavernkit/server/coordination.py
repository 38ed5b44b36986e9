"""What the processes of one server share, as protocols: the chat turn lock, the turn event log
and the rate limiter. One process uses the in-memory implementations; several processes use
the Redis ones (issue 20), so a turn started through one process is resumed through another
and a chat has one generation across all of them; :class:`TurnStops` carries a stop
(``DELETE`` of a turn, an ``interrupt``) to the process that runs the turn, and
:class:`ScriptQuestions` lists the questions of interactive script runs to every process and
carries an answer to the process whose run asked it. Key cooldowns
already have their protocol (:class:`tavernkit.generation.keys.CooldownStore`).

Each implementation is tested against the same behaviour; the server holds only these types.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "DEFAULT_LOCK_LEASE_S",
    "ChatLock",
    "RateDecision",
    "RateLimiter",
    "RelayedAnswer",
    "ScriptQuestions",
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


@dataclass(frozen=True, slots=True)
class RelayedAnswer:
    """What the process running a script answered to an answer another process took: the
    status, JSON body and headers its answer route would have given (the run's next step, or
    its typed error)."""

    status: int
    body: Mapping[str, Any]
    headers: Mapping[str, str]


#: how a process takes an answer relayed to it: ``(owner, chat_id, run_id, answer)`` (the
#: answer route's body) to what its answer route answers
AnswerTaker = Callable[[str, str, str, Mapping[str, Any]], Awaitable[RelayedAnswer]]


class ScriptQuestions(Protocol):
    """The open questions of interactive script runs, shared by the processes (one process
    needs none: its runs are all its own). A run stays in the process that started it; its
    question is listed to every process, and an answer any process takes is relayed to it."""

    async def open(
        self, owner: str, chat_id: str, run_id: str, started: float, step: Mapping[str, Any]
    ) -> None:
        """Run ``run_id`` of this process (started at epoch ``started``) waits on the
        question of its ``asking`` ``step``."""
        ...

    async def close(self, owner: str, chat_id: str, run_id: str) -> None:
        """The run's question is answered, cancelled or timed out."""
        ...

    async def listed(self, owner: str, chat_id: str) -> list[tuple[float, Mapping[str, Any]]]:
        """The open questions of ``owner``'s runs on ``chat_id`` in processes still running,
        as (the run's start, its ``asking`` step)."""
        ...

    async def forward(
        self, owner: str, chat_id: str, run_id: str, answer: Mapping[str, Any]
    ) -> RelayedAnswer:
        """Give ``answer`` to the process running ``run_id`` and wait for what it answers.
        :class:`~tavernkit.errors.NotFound` when no such run waits on the chat, or the
        process that ran it stopped (said as the run having ended)."""
        ...

    async def run(self, take: AnswerTaker, *, ready: asyncio.Event | None = None) -> None:
        """Take the answers relayed to this process's runs with ``take``, until cancelled;
        sets ``ready`` once they are being received."""
        ...
