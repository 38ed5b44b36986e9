"""TurnHub over a real ChatService and a scripted upstream on loopback: the log a turn writes,
busy chats, interrupt, stop, and checks that run before anything is stored."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from chat._server import HangingServer, HangReply, Reply
from chat.conftest import StepClock, make_world
from tavernkit.chat import ChatService
from tavernkit.errors import ChatBusy, CoordinationError, GenerateTaskError, NotFound
from tavernkit.facade import Tavern
from tavernkit.server.coordination import TurnEvent
from tavernkit.server.coordination_local import InMemoryChatLock, InMemoryTurnEventLog
from tavernkit.server.turn_request import TurnRequest
from tavernkit.server.turns import TurnHub


class Hub:
    def __init__(self, tk: Tavern, server: HangingServer) -> None:
        self.tk = tk
        self.server = server
        self.chats = ChatService(tk.runtime, clock=StepClock(), stream_interval=0)
        self.log = InMemoryTurnEventLog()
        self.hub = TurnHub(self.log, InMemoryChatLock())

    async def events(self, turn_id: str, after: str | None = None) -> list[TurnEvent]:
        return [e async for e in self.log.read(turn_id, after)]


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    async with HangingServer() as server:
        tk = await make_world(tmp_path / "home", server)
        try:
            yield Hub(tk, server)
        finally:
            await tk.close()


def text_of(events: list[TurnEvent]) -> str:
    return "".join(str(e.data["text"]) for e in events if e.type == "text")


async def test_a_turn_logs_started_text_and_done_and_stores_the_reply(hub: Hub) -> None:
    hub.server.script(Reply(text="Rough seas tonight, Ada."))
    info = await hub.chats.new_chat("Mira")
    started = await hub.hub.start(hub.chats, info.id, TurnRequest("send", text="Hello"))
    events = await hub.events(started.turn_id)
    assert events[0].type == "notice" and events[0].data["kind"] == "started"
    assert events[0].data["chat"] == info.id and events[0].data["verb"] == "send"
    assert {e.type for e in events[1:-1]} == {"text"}
    done = events[-1]
    assert done.type == "done" and done.data["status"] == "completed"
    assert done.data["message_index"] == 2
    stored = await hub.chats.load(info.id)
    assert stored.messages[-1].data["mes"] == text_of(events) == "Rough seas tonight, Ada."
    assert [int(e.id) for e in events] == list(range(1, len(events) + 1))
    assert await hub.hub.turn_chat(started.turn_id) == info.id
    assert not hub.hub.running(started.turn_id)


async def test_a_busy_chat_refuses_a_second_turn_unless_it_interrupts(hub: Hub) -> None:
    hub.server.script(
        HangReply(text="Partly. said and never finished", hang_after=1), Reply("New.")
    )
    info = await hub.chats.new_chat("Mira")
    first = await hub.hub.start(hub.chats, info.id, TurnRequest("send", text="Hello"))
    await asyncio.wait_for(hub.server.hanging.wait(), 10)
    with pytest.raises(ChatBusy):
        await hub.hub.start(hub.chats, info.id, TurnRequest("swipe"))
    second = await hub.hub.start(hub.chats, info.id, TurnRequest("swipe", interrupt=True))
    first_events = await hub.events(first.turn_id)
    assert first_events[-1].data["status"] == "aborted"
    second_events = await hub.events(second.turn_id)
    assert second_events[-1].data["status"] == "completed"
    stored = await hub.chats.load(info.id)
    # the stopped reply kept what it showed, as the first swipe; the new one is shown
    assert stored.messages[-1].data["swipes"] == [text_of(first_events), "New."]
    assert text_of(first_events).startswith("Partly.")


async def test_stop_ends_the_turn_keeping_what_was_shown(hub: Hub) -> None:
    hub.server.script(HangReply(text="Wait. the rest never comes", hang_after=1))
    info = await hub.chats.new_chat("Mira")
    started = await hub.hub.start(hub.chats, info.id, TurnRequest("send", text="Hello"))
    await asyncio.wait_for(hub.server.hanging.wait(), 10)
    async for event in hub.log.read(started.turn_id):
        if event.type == "text":
            break
    assert hub.hub.stop(started.turn_id)
    await hub.hub.wait(started.turn_id)
    events = await hub.events(started.turn_id)
    assert events[-1].data["status"] == "aborted"
    stored = await hub.chats.load(info.id)
    assert stored.messages[-1].data["mes"] == text_of(events)
    assert text_of(events).startswith("Wait.")
    assert not hub.hub.stop(started.turn_id)  # over: nothing to stop


async def test_bad_turns_are_refused_before_anything_is_stored(hub: Hub) -> None:
    info = await hub.chats.new_chat("Mira")
    with pytest.raises(GenerateTaskError) as kind:
        await hub.hub.start(hub.chats, info.id, TurnRequest("dance"))
    assert kind.value.details["field"] == "kind"
    with pytest.raises(GenerateTaskError) as profile:
        await hub.hub.start(
            hub.chats, info.id, TurnRequest("send", text="Hi", overrides={"profile": "nope"})
        )
    assert profile.value.details["field"] == "profile"
    with pytest.raises(NotFound):
        await hub.hub.start(hub.chats, "no-such-chat", TurnRequest("send", text="Hi"))
    with pytest.raises(NotFound):
        await hub.hub.turn_chat("no-such-turn")
    assert len((await hub.chats.load(info.id)).messages) == 1  # the greeting alone
    assert hub.server.requests == []


async def test_a_turn_that_fails_logs_its_error_then_done(hub: Hub) -> None:
    hub.server.script(Reply(status=401, error={"error": {"message": "bad key sk-secret"}}))
    info = await hub.chats.new_chat("Mira")
    started = await hub.hub.start(hub.chats, info.id, TurnRequest("send", text="Hello"))
    events = await hub.events(started.turn_id)
    assert [e.type for e in events[1:]] == ["error", "done"]
    assert events[-1].data["status"] == "failed"
    assert "sk-secret" not in repr([e.data for e in events])


async def test_close_lets_a_running_turn_store_what_it_showed(hub: Hub) -> None:
    hub.server.script(HangReply(text="Wait. the rest never comes", hang_after=1))
    info = await hub.chats.new_chat("Mira")
    started = await hub.hub.start(hub.chats, info.id, TurnRequest("send", text="Hello"))
    await asyncio.wait_for(hub.server.hanging.wait(), 10)
    await hub.hub.close(grace_s=0.05)
    events = await hub.events(started.turn_id)
    assert events[-1].type == "done" and events[-1].data["status"] == "aborted"
    assert (await hub.chats.load(info.id)).messages[-1].data["mes"] == text_of(events)


async def test_a_reader_that_saw_done_can_start_the_next_turn_at_once(hub: Hub) -> None:
    hub.server.script(Reply(text="One."), Reply(text="Two."))
    info = await hub.chats.new_chat("Mira")
    first = await hub.hub.start(hub.chats, info.id, TurnRequest("send", text="Hi"))
    async for event in hub.log.read(first.turn_id):
        if event.type == "done":
            break
    # no wait for the task: the chat is free by the time ``done`` is readable
    second = await hub.hub.start(hub.chats, info.id, TurnRequest("send", text="Again"))
    await hub.hub.wait(second.turn_id)
    assert [m.data["mes"] for m in (await hub.chats.load(info.id)).messages][-1] == "Two."


class _DoneSpyLog(InMemoryTurnEventLog):
    """Records who holds the chat at the moment a turn's ``done`` is appended."""

    def __init__(self, lock: InMemoryChatLock, key: str) -> None:
        super().__init__()
        self.lock, self.key = lock, key
        self.holder_at_done: list[str | None] = []

    def append_nowait(self, turn_id: str, type: str, data: Mapping[str, Any]) -> str:
        # the turn's writer appends in place on this log (no await between)
        if type == "done":
            lease = self.lock._current(self.key)
            self.holder_at_done.append(None if lease is None else lease.holder)
        return super().append_nowait(turn_id, type, data)


async def test_done_is_appended_after_the_chat_is_free(hub: Hub) -> None:
    # a client that posts its next turn the moment it reads ``done`` (not the end of the
    # stream) must not get a 409: the lock is released before ``done`` exists
    hub.server.script(Reply(text="One."), Reply(status=401, error={"error": {"message": "x"}}))
    info = await hub.chats.new_chat("Mira")
    lock = InMemoryChatLock()
    log = _DoneSpyLog(lock, TurnHub.chat_key(hub.chats.owner, info.id))
    turns = TurnHub(log, lock)
    for text in ("Hi", "Again"):  # a completed turn, then a failed one
        started = await turns.start(hub.chats, info.id, TurnRequest("send", text=text))
        await turns.wait(started.turn_id)
    assert log.holder_at_done == [None, None]


class _ForgetfulLock(InMemoryChatLock):
    """A lock whose lease cannot be renewed (it ran out while the turn ran)."""

    async def renew(self, chat_id: str, holder: str, *, lease_s: float) -> bool:
        return False


async def test_a_turn_that_loses_its_chat_lock_stops(hub: Hub) -> None:
    hub.server.script(HangReply(text="Wait. the rest never comes", hang_after=1))
    info = await hub.chats.new_chat("Mira")
    turns = TurnHub(hub.log, _ForgetfulLock(), lease_s=0.3)
    started = await turns.start(hub.chats, info.id, TurnRequest("send", text="Hello"))
    await asyncio.wait_for(turns.wait(started.turn_id), 10)
    events = await hub.events(started.turn_id)
    assert events[-1].type == "done" and events[-1].data["status"] == "aborted"
    assert (await hub.chats.load(info.id)).messages[-1].data["mes"] == text_of(events)


async def test_a_reader_of_a_turn_whose_process_died_gets_an_end() -> None:
    # the turn's log has its start, but no process runs it and nobody holds its chat: its
    # process was killed (its lease ran out); the reader ends instead of waiting a day
    log, lock = InMemoryTurnEventLog(), InMemoryChatLock()
    turns = TurnHub(log, lock, lease_s=0.05)
    await log.append("t1", "notice", {"kind": "started", "turn": "t1", "chat": "c"})
    events = await asyncio.wait_for(_collect(turns.watched(log.read("t1"), "me:c", "t1")), 5)
    assert [e.type for e in events] == ["notice", "error", "done"]
    assert events[-1].data["status"] == "failed"
    assert events[-1].data["error"]["class"] == "TurnOrphaned"


async def test_a_reader_of_a_turn_another_process_still_runs_keeps_waiting() -> None:
    log, lock = InMemoryTurnEventLog(), InMemoryChatLock()
    turns = TurnHub(log, lock, lease_s=0.05)
    await log.append("t1", "notice", {"kind": "started", "turn": "t1", "chat": "c"})
    assert await lock.acquire("me:c", "t1", lease_s=60)  # the other process holds the chat
    seen: list[TurnEvent] = []

    async def read() -> None:
        async for event in turns.watched(log.read("t1"), "me:c", "t1"):
            seen.append(event)

    reader = asyncio.create_task(read())
    await asyncio.sleep(0.5)  # ten leases of silence
    assert [e.type for e in seen] == ["notice"]
    await log.append("t1", "done", {"status": "completed"})
    await log.close("t1", ttl_s=60)
    await asyncio.wait_for(reader, 5)
    assert [e.type for e in seen] == ["notice", "done"]


async def _collect(events: AsyncIterator[TurnEvent]) -> list[TurnEvent]:
    return [e async for e in events]


class _CancelSwallowingLock(InMemoryChatLock):
    """A lock whose renewal turns a cancel into its own error, as redis-py's pool wait does
    when the cancel lands as its timeout fires (Python 3.11's ``asyncio.timeout``)."""

    def __init__(self) -> None:
        super().__init__()
        self.renewing = asyncio.Event()

    async def renew(self, chat_id: str, holder: str, *, lease_s: float) -> bool:
        self.renewing.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise CoordinationError("No connection available.") from None
        return True


async def test_a_turn_ends_though_its_lock_renewal_swallows_the_cancel(hub: Hub) -> None:
    """The turn ends (its log closed, its task done) while a renewal is under way whose
    cancel comes out as an error: before, the turn awaited that renewer forever and its
    stream never got its ``done`` (35 of 400 streams under load)."""
    hub.server.script(HangReply(text="Wait. then the rest", hang_after=1))
    info = await hub.chats.new_chat("Mira")
    lock = _CancelSwallowingLock()
    turns = TurnHub(hub.log, lock, lease_s=0.3)
    started = await turns.start(hub.chats, info.id, TurnRequest("send", text="Hello"))
    await asyncio.wait_for(lock.renewing.wait(), 10)
    hub.server.release.set()
    await asyncio.wait_for(turns.wait(started.turn_id), 10)
    events = await asyncio.wait_for(hub.events(started.turn_id), 10)
    assert events[-1].type == "done" and events[-1].data["status"] == "completed"


async def test_a_turn_the_database_fails_logs_one_error_then_done(
    hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database stays unreachable while a reply streams (its text writes fail past the
    swipe writer's retries): the turn's log has exactly one ``error`` (an outage, class
    ``StoreUnavailable``, code ``unavailable``), then its failed ``done`` (before, the runner's
    report and the turn's failure each logged one)."""
    from tavernkit.chat.swipe_writer import swipe_writer
    from tavernkit.errors import StoreUnavailable

    store = hub.tk.runtime.store

    async def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("the database at 10.0.0.5:5432 is unreachable")

    hub.server.script(Reply(text="One. Two. Three.", chunks=["One. ", "Two. ", "Three."]))
    info = await hub.chats.new_chat("Mira")
    swipe_writer(store).outage_s = 0.2
    monkeypatch.setattr(store, "update_swipe_texts", unreachable)
    monkeypatch.setattr(store, "update_swipe_text", unreachable)
    started = await hub.hub.start(hub.chats, info.id, TurnRequest("send", text="Hello"))
    events = await asyncio.wait_for(hub.events(started.turn_id), 20)
    errors = [e.data for e in events if e.type == "error"]
    assert len(errors) == 1, errors
    assert errors[0]["class"] == "StoreUnavailable" and errors[0]["code"] == "unavailable"
    assert "10.0.0.5" not in errors[0]["message"]
    assert events[-1].type == "done" and events[-1].data["status"] == "failed"
