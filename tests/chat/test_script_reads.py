"""A script run or a quick-reply click on a stored chat reads what its commands and macros
need (the chat's tail, the ranges a command names), never the whole chat, whose cost grows with
its length (on a 20,000-message chat a click took ~1 s when it loaded it twice)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from _chat_reads import ChatReads
from tavernkit.chat import ChatService
from tavernkit.chat.script_host import run_chat_quick_reply, run_chat_script
from tavernkit.models.chat import Message
from tavernkit.models.quick_reply import QuickReplySet
from tavernkit.quick_reply_bindings import QR_KIND

from ._server import HangingServer
from .conftest import StepClock, World, make_world

MESSAGES = 399  # and the greeting: far longer than what a script reads first


async def _long_chat(world: World, *, quiet_tail: int = 0) -> str:
    """The greeting, then ``MESSAGES`` messages, Mira's and Ada's in turn (``m0``: Mira's),
    the last ``quiet_tail`` of them Mira's alone."""
    info = await world.chats.new_chat("Mira")
    for i in range(MESSAGES):
        user = bool(i % 2) and i < MESSAGES - quiet_tail
        await world.tk.store.append_message(
            info.id,
            {
                "name": "Ada" if user else "Mira",
                "is_user": user,
                "mes": f"m{i}",
                "swipes": None if user else [f"m{i}", f"m{i} other"],
                "swipe_id": 0,
            },
        )
    return info.id


async def _texts(world: World, chat_id: str) -> list[str]:
    stored = await world.chats.load(chat_id)
    return [Message.model_validate(m.data).mes for m in stored.messages]


async def _put_set(world: World, message: str) -> None:
    qr_set = QuickReplySet.model_validate(
        {"name": "Tools", "qrList": [{"id": 1, "label": "Tail", "message": message}]}
    )
    await world.tk.store.put(QR_KIND, qr_set, owner=world.tk.owner, name="Tools")


@pytest.fixture
async def pg_world(postgres_url: str, tmp_path: Path) -> AsyncIterator[World]:
    async with HangingServer() as server:
        tk = await make_world(tmp_path / "home", server, database=postgres_url)
        try:
            yield World(tk, ChatService(tk.runtime, clock=StepClock(), stream_interval=0), server)
        finally:
            await tk.close()


async def test_a_click_and_a_script_read_the_tail_and_the_ranges_they_name(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _click_and_script(world, monkeypatch)


async def test_a_click_and_a_script_read_the_tail_on_postgresql(
    pg_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _click_and_script(pg_world, monkeypatch)


async def _click_and_script(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    chat = await _long_chat(world)
    await _put_set(world, "/echo {{lastMessage}} | /sendas name=Bo hi {{lastUserMessage}}")
    reads = ChatReads(monkeypatch, world.tk.store)

    click = await run_chat_quick_reply(world.chats, chat, "Tools", "Tail")
    assert click.error is None, click.error
    assert [t.message for t in click.toasts] == ["m398"]
    script = await run_chat_script(
        world.chats,
        chat,
        "/send typed {{lastCharMessage}} | /setvar key=id {{lastMessageId}}"
        " | /hide 10 | /cut 20-21 | /del 1 | /messages names=off 0-3",
    )
    assert script.error is None, script.error
    assert script.pipe == "Welcome aboard, Ada.\n\nm0\n\nm1\n\nm2"

    assert reads.whole == []
    # each run: a page of the tail, a one-message window for the names, the ranges it named
    assert sum(reads.rows) + sum(reads.ranges) < 120
    monkeypatch.undo()
    texts = await _texts(world, chat)
    assert texts[-3:] == ["m397", "m398", "hi m397"]  # /del 1 took "typed hi m397"
    assert len(texts) == MESSAGES + 1 + 2 - 2 - 1
    assert texts[19:21] == ["m18", "m21"]  # /cut 20-21 took m19 and m20
    stored = await world.chats.load(chat)
    assert stored.messages[10].data["is_system"] is True
    assert stored.header["chat_metadata"]["variables"] == {"id": str(MESSAGES + 2)}


async def test_macros_read_back_to_the_last_user_message_however_far(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = await _long_chat(world, quiet_tail=100)  # Ada last spoke 100 messages back: m297
    reads = ChatReads(monkeypatch, world.tk.store)
    outcome = await run_chat_script(
        world.chats,
        chat,
        "/pass {{lastUserMessage}} {{lastCharMessage}} {{lastMessageId}}"
        " | /setvar key=before {{pipe}}"
        " | /hide 298 | /pass {{lastUserMessage}} | /setvar key=after {{pipe}}"
        " | /messages 297-299",
    )
    assert outcome.error is None, outcome.error
    assert outcome.pipe == "Mira: m296\n\nMira: m298"  # m297 now hidden
    assert reads.whole == []
    assert sum(reads.rows) + sum(reads.ranges) < MESSAGES  # pages back, a larger one each time
    monkeypatch.undo()
    stored = await world.chats.load(chat)
    assert stored.header["chat_metadata"]["variables"] == {
        "before": f"m297 m398 {MESSAGES}",
        "after": "m295",
    }
