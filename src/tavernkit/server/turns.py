"""Turns that belong to the server, not to the request that asked for them.

:meth:`TurnHub.start` checks the turn (the chat exists for the owner, the overrides name
records that exist), takes the chat's :class:`~tavernkit.server.coordination.ChatLock` (a busy
chat is :class:`~tavernkit.errors.ChatBusy` unless ``interrupt``) and runs the
:class:`~tavernkit.chat.ChatService` verb as a task of the hub. The task runs and persists to
the end whoever is watching: a client that disconnects only stops reading. Its events go to a
:class:`~tavernkit.server.coordination.TurnEventLog` through :class:`EventLogSink`, so any
number of clients read the same turn from any event on (``Last-Event-ID``).

Every turn's log is, in order: one ``notice`` with ``kind: "started"`` (the turn's chat and
verb: a process that did not start the turn checks the chat from it), the reply's ``text``,
``reasoning``, ``tool`` and fallback ``notice`` events as they are delivered (a ``withdraw``
takes back the end of the text shown: a failed attempt's unfinished clause, which the
continuation writes again), an ``error``
when the turn failed, and exactly one ``done`` (status ``completed``, ``failed`` or
``aborted``, and where the reply is stored). :meth:`TurnHub.stop` aborts a turn; what was
delivered stays stored and is in the log. :meth:`TurnHub.stop_anywhere` also reaches a turn
that another process runs (through :class:`~tavernkit.server.coordination.TurnStops`: the
chat lock names the running turn, the stop request goes to its process).

The lock's lease is renewed while the turn runs, so a crashed process frees the chat after
one lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tavernkit.chat.group_turn import GroupTurnOutcome, group_for_chat, refuse_group_chat
from tavernkit.chat.reply import TurnOutcome
from tavernkit.chat.service import ChatService
from tavernkit.errors import (
    ChatBusy,
    CoordinationError,
    EgressRefused,
    FormatError,
    GenerateTaskError,
    NotFound,
    ShuttingDown,
    StoreUnavailable,
    TavernKitError,
)
from tavernkit.generation.abort import AbortController
from tavernkit.generation.result import TurnResult
from tavernkit.generation.sink import (
    ErrorEvent,
    NoticeEvent,
    SinkEvent,
    ToolEvent,
    WithdrawEvent,
)
from tavernkit.providers.events import ReasoningDelta, TextDelta
from tavernkit.server.coordination import (
    DEFAULT_LOCK_LEASE_S,
    ChatLock,
    TurnEvent,
    TurnEventLog,
    TurnStops,
)
from tavernkit.server.metrics import PieceTimer, ServerMetrics
from tavernkit.server.task_errors import safe_text
from tavernkit.store.protocol import ChatInfo

logger = logging.getLogger(__name__)

__all__ = [
    "GROUP_TURN_KINDS",
    "TURN_KINDS",
    "EventLogSink",
    "TurnHub",
    "TurnRequest",
    "TurnStarted",
]

#: the verbs a server turn runs (a quiet prompt is a task, not a turn)
TURN_KINDS = ("send", "swipe", "regenerate", "continue", "impersonate")
#: a group chat's verbs: the solo ones, and ``trigger`` (``member`` replies now)
GROUP_TURN_KINDS = (*TURN_KINDS, "trigger")


@dataclass(frozen=True)
class TurnRequest:
    """One turn as a client asks for it. ``text`` and ``attachments`` (image URLs) are for
    ``send``; ``prefill`` for ``send``, ``swipe`` and ``regenerate``; ``overrides`` is a
    :class:`~tavernkit.chat.prepare.TurnOverrides` mapping. ``group``: a group chat's turn
    (:meth:`~tavernkit.chat.ChatService.group_turn`; ``member`` forces who replies, and is
    required by ``trigger``; ``auto`` makes a ``send`` an auto-mode tick)."""

    kind: str = "send"
    text: str = ""
    attachments: Sequence[str] = ()
    prefill: str | None = None
    overrides: Mapping[str, Any] | None = None
    interrupt: bool = False
    group: bool = False
    member: str | None = None
    auto: bool = False
    #: ``send``/``regenerate`` in place of message ``at`` on a new branch of the chat's tree
    at: int | None = None


@dataclass(frozen=True)
class TurnStarted:
    turn_id: str
    chat_id: str
    kind: str


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
    ``window_s`` (the first piece after a quiet window goes at once), or at once when
    ``batch`` wait; a turn of 40 pieces is a few writes instead of 40. On a log that appends
    in place (the in-memory one) each event goes in place.

    A write that fails (Redis restarting) is kept, with every later event, and tried again in
    order (backoff 50 ms doubling to 1 s) while the turn goes on generating and storing.
    :meth:`finish` writes the turn's last events and closes the log, waiting up to
    ``finish_s`` for the log to take them. Retrying is safe: the Redis log refuses an event
    it already has (its ids are the turn's own)."""

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
            wait = self._last_write + self.window_s - loop.time()
            if wait > 0 and len(self._pending) < self.batch and not self._finishing:
                self._full.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), wait)
            taken = list(itertools.islice(self._pending, self.batch))
            events = merged_pieces(taken) if self._append_batch is not None else taken
            # the same events are tried until they land: a retried batch keeps its ids
            while True:
                try:
                    await self._write(events)
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
            for _ in taken:
                self._pending.popleft()

    async def _write(self, events: list[tuple[str, Mapping[str, Any]]]) -> None:
        if self._append_batch is not None:
            await self._append_batch(self.turn_id, events)
        else:
            for type_, data in events:  # pragma: no branch - one at a time, as appended
                await self.log.append(self.turn_id, type_, data)

    async def finish(self, last: Sequence[tuple[str, dict[str, Any]]], *, ttl_s: float) -> None:
        """Append ``last`` after everything before it, then close the log; gives up (logged)
        after ``finish_s`` of a log that takes nothing."""
        for type_, data in last:
            await self.append(type_, data)
        self._finishing = True  # the last events go now, not at the window's end
        self._full.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.finish_s
        try:
            if self._writer is not None:
                await asyncio.wait_for(asyncio.shield(self._writer), self.finish_s)
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
            and type_ in _PIECES
            and out[-1][0] == type_
            and set(data) == set(out[-1][1]) == {"text"}
        ):
            out[-1] = (type_, {"text": out[-1][1]["text"] + data["text"]})
        else:
            out.append((type_, data))
    return out


class _AppendBatch(Protocol):
    async def __call__(
        self, turn_id: str, events: Sequence[tuple[str, Mapping[str, Any]]]
    ) -> None: ...


async def stop_task(task: asyncio.Task[Any], *, wait_s: float = 1.0) -> None:
    """Cancel a helper task and wait for it at most ``wait_s``. Never ``await task`` alone: a
    cancel that lands as a timeout inside it fires (Python 3.11's ``asyncio.timeout``, which
    redis-py's pool wait uses) comes out as that timeout's error, which a loop that retries
    errors swallows; awaiting it then waited forever (issue 37: 35 of 400 turns hung so)."""
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=wait_s)
    if not done:
        logger.warning("a turn's helper task outlived its cancel; left to end on its own")
        task.cancel()
    elif not task.cancelled() and task.exception() is not None:
        logger.warning("a turn's helper task failed (%s)", type_name(task.exception()))


def type_name(exc: BaseException | None) -> str:
    return type(exc).__name__


class EventLogSink:
    """A :class:`~tavernkit.generation.sink.ResponseSink` that appends a turn's events to its
    log, one log event per sink event (empty deltas are dropped), through the turn's
    :class:`TurnLogWriter`. When the writer appends without waiting (the in-memory log in
    place, the Redis log batched) it offers ``emit_nowait``, so the turn runner hands it each
    piece in place, with no queue or task between them."""

    def __init__(self, log: TurnEventLog, turn_id: str, writer: TurnLogWriter | None = None):
        self.log = log
        self.turn_id = turn_id
        self.writer = writer or TurnLogWriter(log, turn_id)
        #: times the turn's pieces for the server's metrics (``None``: not measured)
        self.timer: PieceTimer | None = None

    async def emit(self, event: SinkEvent) -> None:
        entry = sink_event_entry(event)
        if entry is not None:
            self._time(entry[0])
            await self.writer.append(*entry)

    @property
    def emit_nowait(self) -> Callable[[SinkEvent], None] | None:
        return self._emit_now if self.writer.in_place else None

    def _emit_now(self, event: SinkEvent) -> None:
        entry = sink_event_entry(event)
        if entry is not None:
            self._time(entry[0])
            self.writer.append_nowait(*entry)

    def _time(self, entry_type: str) -> None:
        if self.timer is not None and entry_type in _PIECES:
            self.timer.piece()

    async def flush(self) -> None:
        return None

    async def finalize(self, result: TurnResult) -> None:
        return None

    async def cleanup(self) -> None:
        return None


#: the log entries that are pieces of a reply (timed by :class:`PieceTimer`)
_PIECES = frozenset({"text", "reasoning"})


def sink_event_entry(event: SinkEvent) -> tuple[str, dict[str, Any]] | None:
    """The log's (type, data) of one sink event; ``None`` for one with nothing to show."""
    if isinstance(event, TextDelta):
        return ("text", {"text": event.text}) if event.text else None
    if isinstance(event, ReasoningDelta):
        return ("reasoning", {"text": event.text}) if event.text else None
    if isinstance(event, WithdrawEvent):
        # the end of the text shown so far is taken back (``text`` is exactly that end)
        return ("withdraw", {"text": event.text}) if event.text else None
    if isinstance(event, ToolEvent):
        return "tool", {
            "name": event.name,
            "display": event.display,
            "replayed": event.replayed,
            "error": event.error,
        }
    if isinstance(event, NoticeEvent):
        return "notice", {"kind": "fallback", "text": event.notice.text(), **event.notice.to_json()}
    if isinstance(event, ErrorEvent):
        cause = event.error.cause
        if isinstance(cause, StoreUnavailable | CoordinationError):
            # an outage, not an unknown failure (its own message names the server's address)
            return "error", _turn_error_data(
                type(cause).__name__,
                "unavailable",
                "the server could not reach its database or shared state; try again",
            )
        # the policy's refusal is the server's own words; an upstream's never are shown
        said = str(cause) if isinstance(cause, EgressRefused) else None
        return "error", _turn_error_data(event.error.error_class, event.error.code, said)
    return None


def _turn_error_data(error_class: str, code: str, message: str | None = None) -> dict[str, Any]:
    return {
        "class": error_class,
        "code": code,
        "message": message or f"Generation failed: {error_class} ({code})",
    }


class MemberSink(EventLogSink):
    """A group member's part of a group turn's log: a ``notice`` with ``kind: "member"``
    (its name and avatar) before the member's first event, then its events."""

    def __init__(
        self,
        log: TurnEventLog,
        turn_id: str,
        name: str,
        avatar: str,
        writer: TurnLogWriter | None = None,
    ) -> None:
        super().__init__(log, turn_id, writer)
        self.name = name
        self.avatar = avatar
        self._announced = False

    async def emit(self, event: SinkEvent) -> None:
        if not self._announced and sink_event_entry(event) is not None:
            self._announced = True
            await self.writer.append("notice", self._announcement())
        await super().emit(event)

    def _emit_now(self, event: SinkEvent) -> None:
        if not self._announced and sink_event_entry(event) is not None:
            self._announced = True
            self.writer.append_nowait("notice", self._announcement())
        super()._emit_now(event)

    def _announcement(self) -> dict[str, Any]:
        return {"kind": "member", "name": self.name, "avatar": self.avatar}


def _failure(
    exc: Exception, *, safe: bool = True, shown: bool = False
) -> list[tuple[str, dict[str, Any]]]:
    """The ``error`` and ``done`` events a failed turn ends with (a bug's message stays in
    the server log); ``shown``: the turn logged its ``error`` already (the runner reported
    it), so only ``done`` follows."""
    code: str
    if isinstance(exc, GenerateTaskError):
        code = exc.code
    elif isinstance(exc, StoreUnavailable | CoordinationError):
        code = "unavailable"
    else:
        code = "unknown"
    message = safe_text(exc) if safe else "the turn failed (see the server log)"
    done = ("done", {"status": "failed", "error": {"class": type(exc).__name__, "code": code}})
    if shown:
        return [done]
    return [("error", _turn_error_data(type(exc).__name__, code, message)), done]


def outcome_data(outcome: TurnOutcome | GroupTurnOutcome) -> dict[str, Any]:
    """The ``done`` event of a turn that ran (its stored place; the text is in the log); a
    group turn's lists each member's reply in order, under ``replies``."""
    if isinstance(outcome, GroupTurnOutcome):
        return {
            "status": outcome.status,
            "kind": outcome.kind,
            "user_message_stored": outcome.user_message_stored,
            "replies": [
                {"name": r.name, "avatar": r.avatar, **outcome_data(r.outcome)}
                for r in outcome.replies
            ],
        }
    return {
        "status": outcome.status,
        "kind": outcome.kind,
        "message_index": outcome.message_index,
        "swipe_index": outcome.swipe_index,
        "model": outcome.model,
        "error": None
        if outcome.error is None
        else {"class": outcome.error.error_class, "code": outcome.error.code},
    }


@dataclass
class _Running:
    chat_key: str
    controller: AbortController
    task: asyncio.Task[None] | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)


class TurnHub:
    """The turns one server process runs (see the module docstring).

    ``ttl_s``: how long a finished turn's events stay readable for late reconnects;
    ``lease_s``: the chat lock's lease, renewed every third of it while a turn runs (with the
    turn's log's expiry, where the log has ``keep_open``); ``orphan_check_s``: how often a
    waiting reader checks that the turn's process still holds the chat (a quarter lease by
    default: a reader of a killed process's turn learns it within a lease and two checks);
    ``interrupt_wait_s``: how long an interrupting turn waits for the chat to be free (the
    stopped turn writes what it delivered first), and a stop for another process's turn
    waits for that turn's end; ``stops``: the channel to the other processes (``None``: this
    process is the only one).
    """

    def __init__(
        self,
        log: TurnEventLog,
        lock: ChatLock,
        *,
        ttl_s: float = 600.0,
        lease_s: float = DEFAULT_LOCK_LEASE_S,
        interrupt_wait_s: float = 10.0,
        orphan_check_s: float | None = None,
        stops: TurnStops | None = None,
        metrics: ServerMetrics | None = None,
    ) -> None:
        self.log = log
        self.metrics = metrics
        self.lock = lock
        self.stops = stops
        self.ttl_s = ttl_s
        self.lease_s = lease_s
        self.orphan_check_s = lease_s / 4 if orphan_check_s is None else orphan_check_s
        self.interrupt_wait_s = interrupt_wait_s
        self._running: dict[str, _Running] = {}
        self._by_chat: dict[str, str] = {}
        #: shutting down: no new turn starts (``/health/ready`` says so)
        self.draining = False

    @staticmethod
    def chat_key(owner: str, chat_id: str) -> str:
        return f"{owner}:{chat_id}"

    async def refuse_if_busy(self, owner: str, chat_id: str) -> None:
        """:class:`~tavernkit.errors.ChatBusy` when a turn (of any process) holds the chat of
        id ``chat_id``: what :meth:`start` would answer, asked before the caller is counted
        against its turn rate (a chat named by its name, not its id, is checked by
        :meth:`start` alone)."""
        if await self.lock.holder(self.chat_key(owner, chat_id)) is not None:
            raise ChatBusy(chat_id)

    async def start(self, chats: ChatService, chat_ref: str, request: TurnRequest) -> TurnStarted:
        """Check and start a turn of ``chat_ref`` (an id or name of ``chats``' owner); raises
        :class:`~tavernkit.errors.NotFound`, ``GenerateTaskError("invalid_input")`` (a bad
        override, or the character's writer naming a profile or preset it cannot use),
        :class:`~tavernkit.errors.Conflict` (a solo verb on a group's chat) or
        :class:`~tavernkit.errors.ChatBusy` before anything is stored or started."""
        if self.draining:
            raise ShuttingDown("this server process is shutting down; send the turn again")
        kinds = GROUP_TURN_KINDS if request.group else TURN_KINDS
        if request.kind not in kinds:
            raise GenerateTaskError(
                "invalid_input",
                f"unknown turn kind {request.kind!r} (one of {', '.join(kinds)})",
                details={"field": "kind"},
            )
        if request.kind == "trigger" and not request.member:
            raise GenerateTaskError(
                "invalid_input", "a trigger names the member", details={"field": "member"}
            )
        info = await chats.store.get_chat_info(chat_ref, owner=chats.owner)
        if not request.group and info.character_id is None:
            # a group chat's solo verb is refused here, before anything starts: a 409 to the
            # caller rather than a turn that ends at once in an error event
            await refuse_group_chat(chats.store, info.name, owner=chats.owner)
        await chats.check_overrides(request.overrides)
        if not request.group:
            # a character's writer that cannot be used: refused now, nothing stored (a group's
            # speakers are checked once chosen, still before anything is written)
            await chats.check_writer(info.character_id, request.overrides)
        if request.at is not None:
            await _check_branch_point(chats, info.id, info.message_count, request)
        key = self.chat_key(chats.owner, info.id)
        turn_id = uuid.uuid4().hex
        await self._take(key, turn_id, interrupt=request.interrupt)
        running = _Running(key, AbortController())
        self._running[turn_id] = running
        self._by_chat[key] = turn_id
        try:
            await self.log.append(
                turn_id,
                "notice",
                {"kind": "started", "turn": turn_id, "chat": info.id, "verb": request.kind},
            )
        except BaseException:
            await self._forget(turn_id, running)
            running.done.set()
            raise
        timer = self.metrics.turn_started(request.kind) if self.metrics is not None else None
        running.task = asyncio.create_task(self._run(chats, info, turn_id, running, request, timer))
        return TurnStarted(turn_id, info.id, request.kind)

    async def _take(self, key: str, turn_id: str, *, interrupt: bool) -> None:
        if await self.lock.acquire(key, turn_id, lease_s=self.lease_s):
            return
        if not interrupt:
            raise ChatBusy(key.partition(":")[2])
        current = self._by_chat.get(key)
        if current is not None:
            self.stop(current)
        elif self.stops is not None:
            # another process runs the chat's turn: the lock's holder is that turn's id
            holder = await self.lock.holder(key)
            if holder is not None:
                await self.stops.request(holder)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.interrupt_wait_s
        while loop.time() < deadline:
            if current is not None and current in self._running:
                # the stopped turn writes what it delivered, then frees the chat
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        self._running[current].done.wait(), deadline - loop.time()
                    )
            if await self.lock.acquire(key, turn_id, lease_s=self.lease_s):
                return
            await asyncio.sleep(0.05)
        raise ChatBusy(key.partition(":")[2])

    async def _run(
        self,
        chats: ChatService,
        info: ChatInfo,
        turn_id: str,
        running: _Running,
        request: TurnRequest,
        timer: PieceTimer | None = None,
    ) -> None:
        renewer = asyncio.create_task(self._renew(running, turn_id))
        # the turn's last events, appended once the chat is free: a client that read ``done``
        # may start the next turn at once (a CancelledError leaves none: the log just closes)
        last: list[tuple[str, dict[str, Any]]] = []
        writer = TurnLogWriter(self.log, turn_id)
        sink = EventLogSink(self.log, turn_id, writer)
        sink.timer = timer
        try:
            try:
                outcome = await _run_verb(chats, info, request, sink, running.controller)
            except TavernKitError as exc:
                last = _failure(exc, shown=writer.errored)
            except Exception as exc:  # a bug must still end the log, without its message
                last = _failure(exc, safe=False, shown=writer.errored)
            else:
                last = [("done", outcome_data(outcome))]
        finally:
            await stop_task(renewer)
            try:
                await self._forget(turn_id, running)
            except TavernKitError as exc:  # the lock's lease frees the chat then
                logger.warning("could not release a chat's lock (%s)", type_name(exc))
            finally:
                try:
                    await writer.finish(last, ttl_s=self.ttl_s)
                finally:
                    running.done.set()
                    self._count_end(last)

    def _count_end(self, last: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Count the turn's end (its ``done`` event's status and error class) in the
        metrics; a turn cancelled with no ``done`` counts as ``cancelled``."""
        if self.metrics is None:
            return
        done = next((data for type, data in last if type == "done"), None)
        if done is None:
            self.metrics.turn_finished("cancelled", None)
            return
        error = done.get("error")
        error_class = error.get("class") if isinstance(error, dict) else None
        self.metrics.turn_finished(str(done.get("status")), error_class)

    async def _renew(self, running: _Running, turn_id: str) -> None:
        """Keep the chat's lease while the turn runs. A lease that could not be renewed (it
        ran out, and another turn may hold the chat now) stops the turn: two generations of
        one chat must never run at once. A coordination error is retried at the next tick."""
        while turn_id in self._running:
            await asyncio.sleep(self.lease_s / 3)
            if turn_id not in self._running:
                return
            try:
                kept = await self.lock.renew(running.chat_key, turn_id, lease_s=self.lease_s)
            except TavernKitError as exc:
                logger.warning("could not renew the chat lock of a turn (%s)", type(exc).__name__)
                continue
            if not kept:
                logger.warning("a turn lost its chat lock; stopping it")
                running.controller.abort("lost the chat lock")
                return
            await self._keep_log_open(turn_id)

    async def _keep_log_open(self, turn_id: str) -> None:
        """Push back the expiry of a running turn's log (one that waits long on its model
        writes nothing): a log whose process died expires soon, not this one."""
        keep_open = getattr(self.log, "keep_open", None)
        if keep_open is None:
            return
        try:
            await keep_open(turn_id)
        except TavernKitError as exc:  # its next append or renewal sets it again
            logger.warning("could not keep a turn's log open (%s)", type(exc).__name__)

    async def watched(
        self, events: AsyncIterator[TurnEvent], chat_key: str, turn_id: str
    ) -> AsyncIterator[TurnEvent]:
        """``events`` (a reader of ``turn_id``'s log) with an end for a turn whose process
        died: when, at two checks in a row (``orphan_check_s`` apart) with nothing new read in
        between, no turn of this process is it and the chat's lock no longer names it (its
        lease ran out), the log gets a failed ``done`` and closes, so readers end instead of
        waiting out its expiry. The events pass through untouched."""
        reader = events.__aiter__()
        seen = 0
        waiting = False

        over = False  # the reader ended: the watchdog too, even if its cancel was lost

        async def watch() -> None:
            last, quiet = -1, 0
            while not over:
                await asyncio.sleep(self.orphan_check_s)
                if not waiting or seen != last:  # events came, or the client is slow
                    last, quiet = seen, 0
                    continue
                quiet = quiet + 1 if await self._orphaned(chat_key, turn_id) else 0
                if quiet >= 2:  # a check of grace: a turn that just freed the chat ends now
                    await self._end_orphan(turn_id)
                    return

        watchdog = asyncio.create_task(watch())
        if self.metrics is not None:
            self.metrics.streams_open.inc()
        try:
            while True:
                waiting = True
                try:
                    event = await reader.__anext__()
                except StopAsyncIteration:
                    return
                finally:
                    waiting = False
                seen += 1
                yield event
        finally:
            over = True
            if self.metrics is not None:
                self.metrics.streams_open.dec()
            await stop_task(watchdog)

    async def _orphaned(self, chat_key: str, turn_id: str) -> bool:
        """No process runs the turn any more: not this one, and the chat's lock names
        another holder or none."""
        if turn_id in self._running:
            return False
        try:
            return await self.lock.holder(chat_key) != turn_id
        except TavernKitError:  # coordination down: no verdict, ask again
            return False

    async def _end_orphan(self, turn_id: str) -> None:
        logger.warning("a turn's process stopped before it ended; closing its log")
        error = {"class": "TurnOrphaned", "code": "server_error"}
        await self.log.append(
            turn_id,
            "error",
            {**error, "message": "the server process running this turn stopped"},
        )
        await self.log.append(turn_id, "done", {"status": "failed", "error": error})
        await self.log.close(turn_id, ttl_s=self.ttl_s)

    async def _forget(self, turn_id: str, running: _Running) -> None:
        self._running.pop(turn_id, None)
        if self._by_chat.get(running.chat_key) == turn_id:
            del self._by_chat[running.chat_key]
        await self.lock.release(running.chat_key, turn_id)

    def stop(self, turn_id: str) -> bool:
        """Stop a running turn of this process (what it delivered stays); whether it was
        running here."""
        running = self._running.get(turn_id)
        if running is None:
            return False
        return running.controller.abort("stopped")

    async def stop_anywhere(self, owner: str, chat_id: str, turn_id: str) -> bool:
        """Stop the turn whichever process runs it, and return once it ended (what it
        delivered stored); whether it was running. A turn of another process is reached
        through ``stops`` when the chat's lock names it; without ``stops`` only this
        process's turns are."""
        if self.stop(turn_id):
            await self.wait(turn_id)
            return True
        if self.stops is None or await self.lock.holder(self.chat_key(owner, chat_id)) != turn_id:
            return False
        # the other process closes the turn's log after storing what it delivered; the request
        # is sent again each second (one sent while that process was subscribing again after
        # a Redis restart reached no one)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.interrupt_wait_s
        while loop.time() < deadline:
            await self.stops.request(turn_id)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(1.0, max(0.0, deadline - loop.time()))):
                    try:
                        async for _ in self.log.read(turn_id):
                            pass
                    except KeyError:
                        pass  # its log is gone: it ended long ago
                    return True
        raise CoordinationError(
            f"the process running turn {turn_id} did not answer the stop in "
            f"{self.interrupt_wait_s:g} s"
        )

    def running(self, turn_id: str) -> bool:
        return turn_id in self._running

    def runs_for(self, turn_id: str, chat_key: str) -> bool:
        """Whether this process runs ``turn_id`` on the chat of ``chat_key`` (owner and id)."""
        running = self._running.get(turn_id)
        return running is not None and running.chat_key == chat_key

    async def wait(self, turn_id: str) -> None:
        """Return when the turn (of this process) has ended and its log is closed."""
        running = self._running.get(turn_id)
        if running is not None:
            await running.done.wait()

    async def started(self, turn_id: str) -> TurnEvent:
        """The turn's ``started`` notice; ``KeyError`` for a turn the log does not know."""
        async for event in self.log.read(turn_id):
            if event.type == "notice" and event.data.get("kind") == "started":
                return event
            break
        raise KeyError(turn_id)

    async def turn_chat(self, turn_id: str) -> str:
        """The chat id a turn belongs to; :class:`~tavernkit.errors.NotFound` when unknown."""
        try:
            event = await self.started(turn_id)
        except KeyError:
            raise NotFound(f"no turn {turn_id!r}") from None
        return str(event.data["chat"])

    async def drain(self, *, grace_s: float, finish_s: float = 5.0) -> None:
        """Shut down (SIGTERM): no turn starts from now on; running turns get ``grace_s`` to
        finish, then are stopped (what they showed is stored, their logs end with ``done``);
        returns once they ended, or ``finish_s`` later, and once this process's readers of
        other turns were ended (with an ``error`` event: they reconnect elsewhere)."""
        self.draining = True
        await self._wait_running(grace_s)
        for turn_id in list(self._running):
            self.stop(turn_id)
        await self._wait_running(finish_s)
        end_readers = getattr(self.log, "end_readers", None)
        if end_readers is not None:
            await end_readers(within_s=1.0)

    async def _wait_running(self, timeout_s: float) -> None:
        pending = [r.done.wait() for r in self._running.values()]
        if pending:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*pending), timeout_s)

    async def close(self, *, grace_s: float = 5.0) -> None:
        """Shut down: let running turns finish for ``grace_s``, then stop the rest; each
        stored what it delivered when this returns."""
        pending = [r.done.wait() for r in self._running.values()]
        if pending:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*pending), grace_s)
        for turn_id in list(self._running):
            self.stop(turn_id)
        tasks = [r.task for r in self._running.values() if r.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


async def _run_verb(
    chats: ChatService,
    info: ChatInfo,
    request: TurnRequest,
    sink: EventLogSink,
    controller: AbortController,
) -> TurnOutcome | GroupTurnOutcome:
    chat_id = info.id
    if request.group:
        return await _run_group_verb(chats, chat_id, request, sink, controller)
    common: dict[str, Any] = {
        "sink": sink,
        "abort": controller.signal,
        "overrides": request.overrides,
        "interrupt": request.interrupt,
        "checked": info,  # TurnHub.start read it and checked the overrides
    }
    kind = request.kind
    if kind == "send":
        return await chats.send(
            chat_id,
            request.text,
            attachments=list(request.attachments),
            prefill=request.prefill,
            at=request.at,
            **common,
        )
    if kind == "swipe":
        return await chats.swipe(chat_id, prefill=request.prefill, **common)
    if kind == "regenerate":
        return await chats.regenerate(chat_id, prefill=request.prefill, at=request.at, **common)
    if kind == "continue":
        return await chats.continue_(chat_id, **common)
    return await chats.impersonate(chat_id, **common)


async def _check_branch_point(
    chats: ChatService, chat_id: str, count: int, request: TurnRequest
) -> None:
    """Refuse an ``at`` the turn cannot branch at (422 naming ``at``), before anything
    starts: only a ``send`` or ``regenerate`` (a solo chat's or a group's; not an auto-mode
    tick) branches, at a message after the first, and a regenerate at a reply (the chat's
    tree: :meth:`ChatService.fork`)."""
    at = request.at
    if request.kind not in ("send", "regenerate") or request.auto:
        raise FormatError("only a send or a regenerate starts a branch", field="at")
    if at is None or not 1 <= at < count:
        raise FormatError(
            f"a branch starts at a message from 1 to {count - 1}, not {at}", field="at"
        )
    if request.kind == "regenerate":
        rows = await chats.store.load_message_range(
            chat_id, start=at, stop=at + 1, owner=chats.owner
        )
        if rows and rows[0].data.get("is_user"):
            raise FormatError(f"message {at} is the user's; regenerate a reply", field="at")


#: a group turn's verb -> :meth:`ChatService.group_turn`'s kind
_GROUP_KIND = {"send": "normal", "trigger": "normal"}


async def _run_group_verb(
    chats: ChatService,
    chat_id: str,
    request: TurnRequest,
    sink: EventLogSink,
    controller: AbortController,
) -> GroupTurnOutcome:
    info = await chats.store.get_chat_info(chat_id, owner=chats.owner)
    loaded = await group_for_chat(chats.store, info.name, owner=chats.owner)
    avatars = {m.name: m.avatar for m in loaded.members}

    def member_sink(name: str) -> MemberSink:
        member = MemberSink(sink.log, sink.turn_id, name, avatars.get(name, ""), sink.writer)
        member.timer = sink.timer
        return member

    return await chats.group_turn(
        chat_id,
        _GROUP_KIND.get(request.kind, request.kind),
        text=request.text if request.kind == "send" else "",
        member=request.member,
        auto=request.auto,
        member_sink=member_sink,
        abort=controller.signal,
        overrides=request.overrides,
        interrupt=request.interrupt,
        at=request.at,
    )
