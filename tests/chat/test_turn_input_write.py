"""The user's message of a ``send`` is written with its reply's place, in one transaction (the
reply's swipe marked partial in it), while the request goes upstream; a turn that fails or is
cancelled before that, whose place could not be stored, or whose build reloads the chat, writes
the message on its own, so it is never lost and the stored order is the user's message, then
the reply."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tavernkit.errors import Conflict, StoreError
from tavernkit.models.chat import Message
from tavernkit.store.chat_window import windows

from ._server import HangReply, Reply
from .conftest import World


def _transactions(statements: list[str]) -> list[list[str]]:
    out: list[list[str]] = []
    for sql in statements:
        if sql == "BEGIN IMMEDIATE":
            out.append([])
        elif out and sql != "COMMIT":
            out[-1].append(sql)
    return out


async def _texts(world: World, chat_id: str) -> list[str]:
    return [m.data["mes"] for m in (await world.chats.load(chat_id)).messages]


async def test_the_users_message_and_the_reply_place_are_one_transaction(world: World) -> None:
    info = await world.chats.new_chat("Mira")
    world.server.script(Reply(text="Aye."))
    seen: list[str] = []
    async with world.tk.store.trace(seen.append):
        assert (await world.chats.send(info.id, "Hello")).status == "completed"
    appends = [t for t in _transactions(seen) if any("MAX(position)" in s for s in t)]
    assert len(appends) == 1  # one append: both messages
    assert (await _texts(world, info.id))[-2:] == ["Hello", "Aye."]
    sent = world.server.requests[-1].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"][-1] == "Hello"


async def test_a_turn_cancelled_before_the_reply_keeps_the_users_message(world: World) -> None:
    info = await world.chats.new_chat("Mira")
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()
    turn: asyncio.Task[object] | None = None

    def cancel_at_the_tools(sql: str) -> None:  # inside the prepare step
        if "'mcp_server'" in sql and turn is not None:
            # the list of MCP servers is a short read, on the loop's own thread (the turn waits
            # at its next step, which the cancel then reaches); a longer one, on the store's
            if threading.get_ident() == loop_thread:
                turn.cancel()
            else:
                loop.call_soon_threadsafe(turn.cancel)

    async with world.tk.store.trace(cancel_at_the_tools):
        turn = asyncio.create_task(world.chats.send(info.id, "Still here"))
        with pytest.raises(asyncio.CancelledError):
            await turn
    assert world.server.requests == []  # nothing went upstream
    assert (await _texts(world, info.id))[-1] == "Still here"


async def test_a_build_that_reloads_the_chat_sees_the_users_message_once(world: World) -> None:
    info = await world.chats.new_chat("Mira")
    for i in range(6):
        world.server.script(Reply(text=f"Reply {i}."))
        assert (await world.chats.send(info.id, f"Message {i}")).status == "completed"
    first = windows.first
    windows.clear()
    windows.first = 2  # the build outgrows the window: it reloads the chat from the store
    try:
        world.server.script(Reply(text="Last."))
        assert (await world.chats.send(info.id, "Newest")).status == "completed"
        assert windows.start(info.id) > 2
    finally:
        windows.first = first
        windows.clear()
    texts = await _texts(world, info.id)
    assert texts[-2:] == ["Newest", "Last."] and texts.count("Newest") == 1
    sent = [m["content"] for m in world.server.requests[-1].body["messages"]]
    assert sent.count("Newest") == 1 and "Message 0" in sent


async def test_the_request_goes_upstream_while_the_reply_place_is_stored(world: World) -> None:
    """The place's write holds the store's thread until the upstream has the request: a turn
    that stored the place before sending would never get there (the wait would time out)."""
    info = await world.chats.new_chat("Mira")
    world.server.script(Reply(text="Aye."))
    upstream_had_it: list[bool] = []
    partial_in_place: list[bool] = []
    current: list[str] = []

    def hold_the_place(sql: str) -> None:  # on the store's thread
        if sql == "BEGIN IMMEDIATE":
            current.clear()
        current.append(sql)
        if "MAX(position)" in sql and not upstream_had_it:
            deadline = time.monotonic() + 5.0
            while not world.server.requests and time.monotonic() < deadline:
                time.sleep(0.001)
            upstream_had_it.append(bool(world.server.requests))
        if sql.startswith("INSERT INTO swipes"):
            partial_in_place.append(any("MAX(position)" in s for s in current))

    async with world.tk.store.trace(hold_the_place):
        outcome = await world.chats.send(info.id, "Hello")
    assert upstream_had_it == [True]
    assert partial_in_place[0]  # the place's swipe rows go in the append's own transaction
    assert outcome.status == "completed" and outcome.message_index is not None
    stored = await world.chats.load(info.id)
    assert [m.data["mes"] for m in stored.messages][-2:] == ["Hello", "Aye."]
    assert stored.messages[-1].partial_swipes == ()  # finished: no longer partial


async def test_a_reply_place_being_stored_is_partial_until_the_reply_ends(world: World) -> None:
    info = await world.chats.new_chat("Mira")
    world.server.script(HangReply(text="One two three.", hang_after=1))
    turn = asyncio.create_task(world.chats.send(info.id, "Hi"))
    await asyncio.wait_for(world.server.hanging.wait(), 10)
    for _ in range(200):  # the first piece is written in the background
        reply = (await world.chats.load(info.id)).messages[-1]
        if reply.data.get("mes"):
            break
        await asyncio.sleep(0.01)
    assert reply.partial_swipes == (0,) and not reply.data.get("is_user")
    world.server.release.set()
    assert (await turn).status == "completed"
    assert (await world.chats.load(info.id)).messages[-1].partial_swipes == ()


async def test_a_reply_place_that_cannot_be_stored_fails_the_turn_keeping_the_message(
    world: World,
) -> None:
    """The store refuses the reply's row (an SQLite error raised by a trigger): the turn raises
    the store's error, the request is stopped, and the user's message is stored on its own."""
    info = await world.chats.new_chat("Mira")
    db = world.tk.store._conn  # type: ignore[attr-defined]
    await db.execute(
        "CREATE TRIGGER no_replies BEFORE INSERT ON messages "
        "WHEN json_extract(NEW.body, '$.is_user') = 0 AND NEW.position > 0 "
        "BEGIN SELECT RAISE(ABORT, 'disk quota for replies'); END"
    )  # the connection autocommits outside a transaction
    world.server.script(HangReply(text="Never shown.", hang_after=1))
    with pytest.raises(StoreError):
        await asyncio.wait_for(world.chats.send(info.id, "Keep me"), 10)
    stored = await world.chats.load(info.id)
    assert [m.data["mes"] for m in stored.messages][1:] == ["Keep me"]
    assert not world.chats.busy(info.id)
    await db.execute("DROP TRIGGER no_replies")
    world.server.release.set()
    world.server.script(Reply(text="Now."))
    assert (await world.chats.send(info.id, "Again")).status == "completed"
    texts = [m.data["mes"] for m in (await world.chats.load(info.id)).messages]
    assert texts[1:] == ["Keep me", "Again", "Now."]


async def test_a_turn_cancelled_while_the_place_is_stored_keeps_both(world: World) -> None:
    info = await world.chats.new_chat("Mira")
    world.server.script(HangReply(text="Half.", hang_after=1))
    loop = asyncio.get_running_loop()
    release = threading.Event()
    turn: asyncio.Task[object] | None = None

    def cancel_inside_the_append(sql: str) -> None:  # on the store's thread
        if "MAX(position)" in sql and turn is not None and not release.is_set():
            loop.call_soon_threadsafe(turn.cancel)
            release.wait(5.0)

    async with world.tk.store.trace(cancel_inside_the_append):
        turn = asyncio.create_task(world.chats.send(info.id, "Cut"))
        await asyncio.sleep(0)
        while not turn.done():
            await asyncio.sleep(0.005)
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await turn
    for _ in range(200):  # the place's write runs to its end on its own
        texts = [m.data["mes"] for m in (await world.chats.load(info.id)).messages]
        if len(texts) == 3:
            break
        await asyncio.sleep(0.01)
    stored = await world.chats.load(info.id)
    assert stored.messages[1].data["mes"] == "Cut"
    assert len(stored.messages) == 3 and stored.messages[2].partial_swipes == (0,)
    world.server.release.set()


async def test_a_swipe_with_no_reply_to_swipe_costs_no_upstream_call(world: World) -> None:
    """Only a new reply's place is stored while the request goes out: a swipe opens its place
    first, so one that finds no reply is a Conflict before anything is sent."""
    info = await world.chats.new_chat("Mira")
    await world.tk.store.append_message(
        info.id, Message.new("Ada", "Anyone there?", is_user=True), owner=world.tk.owner
    )
    with pytest.raises(Conflict):
        await world.chats.swipe(info.id)
    assert world.server.requests == []
