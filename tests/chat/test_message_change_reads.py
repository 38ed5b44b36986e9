"""A change to one message (edit, hide, swipe back, delete a swipe, delete) reads that message
and, for an edit's scripts, the chat's tail: never the whole chat, whose cost grows with its
length (on a 20,000-message chat an edit took ~1 s when it loaded it twice)."""

from __future__ import annotations

import pytest

from _chat_reads import ChatReads
from tavernkit.errors import NotFound
from tavernkit.models.chat import Message

from .conftest import World
from .test_regex_turns import rx

MESSAGES = 399  # and the greeting: longer than a first window; the last, m398, has swipes


async def _long_chat(world: World) -> str:
    info = await world.chats.new_chat("Mira")
    for i in range(MESSAGES):
        await world.tk.store.append_message(
            info.id,
            {
                "name": "Ada" if i % 2 else "Mira",
                "is_user": bool(i % 2),
                "mes": f"m{i} x",
                "swipes": None if i % 2 else [f"m{i} x", f"m{i} other"],
                "swipe_id": 0,
            },
        )
    return info.id


async def test_changing_one_message_never_loads_the_whole_chat(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    await world.tk.regex.add(rx("edit", "/x/g", "EDIT {{char}}", placement=[1, 2], runOnEdit=True))
    chat = await _long_chat(world)
    reads = ChatReads(monkeypatch, world.tk.store)

    edited = await world.chats.edit(chat, 11, "an x far back")
    assert edited.text == "an EDIT Mira far back"  # the edit's script ran, its macro too
    hidden = await world.chats.set_hidden(chat, 12, True)
    assert hidden.is_system
    shown = await world.chats.select_swipe(chat, 1, message_index=13)
    assert shown.text == "m12 other"
    await world.chats.delete_swipe(chat, 13, 1)
    last = await world.chats.select_swipe(chat, 0)  # the last message by default
    assert last.text == "m398 x"
    assert await world.chats.delete_from(chat, MESSAGES) == 1
    with pytest.raises(NotFound):
        await world.chats.edit(chat, MESSAGES + 5, "nowhere")

    assert reads.whole == []
    assert max(reads.rows, default=0) < MESSAGES  # the edit's scripts read a tail at most
    monkeypatch.undo()
    stored = await world.chats.load(chat)
    texts = [Message.model_validate(m.data).text for m in stored.messages]
    assert texts[11] == "an EDIT Mira far back" and len(texts) == MESSAGES  # one deleted
    assert stored.messages[12].data["is_system"] is True
    assert stored.messages[13].data["swipes"] == ["m12 x"]
