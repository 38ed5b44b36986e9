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

The hub's parts: :mod:`~tavernkit.server.turn_request` (what a client asks for),
:mod:`~tavernkit.server.turn_verbs` (the chat verb a turn runs),
:mod:`~tavernkit.server.turn_events` (the sinks that put a reply's events in the log, and the
events a turn ends with) and :mod:`~tavernkit.server.turn_log_writer` (the log's writes, in
order, batched and retried).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tavernkit.chat.group_turn import refuse_group_chat
from tavernkit.chat.service import ChatService
from tavernkit.errors import (
    ChatBusy,
    CoordinationError,
    GenerateTaskError,
    NotFound,
    ShuttingDown,
    TavernKitError,
)
from tavernkit.generation.abort import AbortController
from tavernkit.server.coordination import (
    DEFAULT_LOCK_LEASE_S,
    ChatLock,
    TurnEvent,
    TurnEventLog,
    TurnStops,
)
from tavernkit.server.metrics import PieceTimer, ServerMetrics
from tavernkit.server.turn_events import EventLogSink, failure_events, outcome_data
from tavernkit.server.turn_log_writer import TurnLogWriter, type_name
from tavernkit.server.turn_request import GROUP_TURN_KINDS, TURN_KINDS, TurnRequest, TurnStarted
from tavernkit.server.turn_verbs import check_branch_point, run_verb
from tavernkit.store.chat_types import ChatInfo

logger = logging.getLogger(__name__)

__all__ = ["TurnHub", "stop_task"]


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
            await check_branch_point(chats, info.id, info.message_count, request)
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
                outcome = await run_verb(chats, info, request, sink, running.controller)
            except TavernKitError as exc:
                last = failure_events(exc, shown=writer.errored)
            except Exception as exc:  # a bug must still end the log, without its message
                last = failure_events(exc, safe=False, shown=writer.errored)
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
