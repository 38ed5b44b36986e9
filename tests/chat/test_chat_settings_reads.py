"""A chat's settings (its Author's Note, locked persona, chat lorebook and review setting) are
read and changed from the chat's header, never by loading the whole chat: on a long chat
``Store.load_chat`` (whose cost grows with the chat's length) is not called, and each change
lands in ``chat_metadata`` with the others kept."""

from __future__ import annotations

import pytest

from _chat_reads import ChatReads
from tavernkit.chat.authors_note import authors_note, set_authors_note
from tavernkit.chat.lorebooks import set_chat_lorebook
from tavernkit.chat.personas import Personas
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.profile import ReviewSettings

from .conftest import World


async def test_chat_settings_never_load_the_whole_chat(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, owner = world.tk.store, world.tk.owner
    info = await world.chats.new_chat("Mira")
    for i in range(60):
        await store.append_message(
            info.id, {"name": "Ada" if i % 2 else "Mira", "is_user": bool(i % 2), "mes": f"m{i}"}
        )
    await store.put(
        "lorebook", Lorebook.model_validate({"entries": {}}), name="Harbor", owner=owner
    )
    personas = Personas(store, owner=owner)
    await personas.create("Ada", "A sailor.")
    reads = ChatReads(monkeypatch, store)
    await set_authors_note(store, info.name, owner=owner, text="Storm ahead.", depth=2)
    assert (await authors_note(store, info.id, owner=owner)).prompt == "Storm ahead."
    await set_chat_lorebook(store, info.id, "Harbor", owner=owner)
    await personas.set_for_chat(info.id, "Ada")
    persona = await personas.for_chat(info.id)
    assert persona is not None and persona.description == "A sailor."
    await world.chats.set_review(info.id, ReviewSettings(enabled=False))
    review = await world.chats.review(info.id)
    assert review is not None and review.enabled is False
    assert reads.whole == []
    monkeypatch.undo()
    stored = await store.load_chat(info.id, owner=owner)
    metadata = stored.header["chat_metadata"]
    # every change landed, none undid another's
    assert metadata["note_prompt"] == "Storm ahead." and metadata["note_depth"] == 2
    assert metadata["world_info"] == "Harbor"
    assert metadata["persona"] and metadata["tavernkit_review"]["enabled"] is False
    assert stored.info.message_count == 61  # the greeting and the sixty
