"""The user's message of a ``send`` is written with its reply's place, in one transaction, just
before the request goes upstream; a turn that fails or is cancelled before that, or whose build
reloads the chat, writes the message on its own first, so it is never lost and the stored order
is the user's message, then the reply."""

from __future__ import annotations

import asyncio

import pytest

from tavernkit.store.chat_window import windows

from ._server import Reply
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
    turn: asyncio.Task[object] | None = None

    def cancel_at_the_tools(sql: str) -> None:  # on the store's thread, inside the prepare step
        if "'mcp_server'" in sql and turn is not None:
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
