"""Every turn verb reads a window of the chat, never the whole chat: ``send``, ``swipe``,
``continue_`` and ``regenerate`` on a long chat never call ``Store.load_chat`` (whose cost
grows with the chat's length); ``send`` loads the chat's state once."""

from __future__ import annotations

from typing import Any

import pytest

from tavernkit.chat import prepare, service, user_input
from tavernkit.chat.authors_note import set_authors_note
from tavernkit.store import chat_state
from tavernkit.store.chat_types import StoredChat

from ._server import Reply
from .conftest import World


async def test_turn_verbs_never_load_the_whole_chat(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = await world.chats.new_chat("Mira")
    for i in range(40):
        await world.tk.store.append_message(
            info.id, {"name": "Ada" if i % 2 else "Mira", "is_user": bool(i % 2), "mes": f"m{i}"}
        )
    whole_loads: list[str] = []
    load_chat = world.tk.store.load_chat

    async def counting_load_chat(ref: str, **kwargs: Any) -> StoredChat:
        whole_loads.append(ref)
        return await load_chat(ref, **kwargs)

    monkeypatch.setattr(world.tk.store, "load_chat", counting_load_chat)
    world.server.script(
        Reply(text="One."), Reply(text="Two."), Reply(text=" more."), Reply(text="Three.")
    )
    assert (await world.chats.send(info.id, "Hello")).status == "completed"
    assert (await world.chats.swipe(info.id)).status == "completed"
    assert (await world.chats.continue_(info.id)).status == "completed"
    assert (await world.chats.regenerate(info.id)).status == "completed"
    assert whole_loads == []
    # and what they wrote is where it belongs
    monkeypatch.undo()
    stored = await world.tk.store.load_chat(info.id)
    assert [m.data["mes"] for m in stored.messages[-2:]] == ["Hello", "Three."]
    assert stored.info.message_count == 43


async def test_send_loads_the_chat_state_once(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Storing the user's message loads the state (card, books, presets, the chat's tail) and
    # the turn builds from it as it is after the message: no second load.
    loads: list[str] = []
    real = chat_state.load_chat_state

    async def counting(*args: Any, **kwargs: Any) -> Any:
        loads.append(str(kwargs.get("chat_id")))
        return await real(*args, **kwargs)

    monkeypatch.setattr(prepare, "load_chat_state", counting)
    monkeypatch.setattr(service, "load_chat_state", counting)
    monkeypatch.setattr(user_input, "load_chat_state", counting)
    info = await world.chats.new_chat("Mira")
    loads.clear()
    world.server.script(Reply(text="One."), Reply(text="Two."))
    assert (await world.chats.send(info.id, "Hello")).status == "completed"
    assert loads == [info.id]
    # Text with macros: the state loaded to evaluate them is the one the turn builds from,
    # as the store holds it after the message (appended) and its variables (set).
    await set_authors_note(
        world.tk.store, info.id, owner=world.tk.owner, text="Mood: {{getvar::mood}}", depth=0
    )
    loads.clear()
    out = await world.chats.send(info.id, "{{setvar::mood::calm}}Hi {{char}}")
    assert out.status == "completed", out.error
    assert loads == [info.id]
    sent = world.server.requests[-1].body["messages"]
    assert any(m["content"] == "Hi Mira" for m in sent if m["role"] == "user")
    assert any("Mood: calm" in str(m["content"]) for m in sent)
    stored = await world.chats.load(info.id)
    assert stored.header["chat_metadata"]["variables"] == {"mood": "calm"}
    assert [m.data["mes"] for m in stored.messages[-2:]] == ["Hi Mira", "Two."]


async def test_a_send_reads_the_settings_the_chat_and_the_records_once(world: World) -> None:
    info = await world.chats.new_chat("Mira")
    world.server.script(Reply(text="One."))
    seen: list[str] = []
    async with world.tk.store.trace(seen.append):
        assert (await world.chats.send(info.id, "Hello")).status == "completed"
    reads = [s for s in seen if s.startswith("SELECT")]
    assert sum("FROM settings" in s for s in reads) == 1
    assert sum("ORDER BY position DESC LIMIT" in s for s in reads) == 1  # the tail, once
    # the card, presets, templates, persona and profile: one revision check for all
    assert sum(s.startswith("SELECT kind, id, name, created, revision") for s in reads) == 1
    # and one look at the card's revision before anything is stored: its writer is checked
    # then (issue 39), and the model that look shares is the one the load then reuses
    assert sum(s.startswith("SELECT id, created, revision") for s in reads) == 1
