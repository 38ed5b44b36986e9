"""The library calls behind the CLI's staples, against a real store and the scripted server:
personas, author's note, chat/character lorebooks, search, undo, quick replies, characters,
and the override check that runs before a turn writes anything."""

from __future__ import annotations

import json

import pytest

from tavernkit.chat.authors_note import authors_note, set_authors_note
from tavernkit.chat.inspect import wire_body
from tavernkit.chat.lorebooks import (
    attach_character_lorebook,
    character_lorebooks,
    set_chat_lorebook,
)
from tavernkit.chat.personas import Personas
from tavernkit.chat.quick_replies import QuickReplies, quick_reply_lines
from tavernkit.chat.search import search_chats
from tavernkit.chat.undo import UndoStack, restore_snapshot, take_snapshot
from tavernkit.errors import ChatTurnError, Conflict, FormatError, NotFound
from tavernkit.models.lorebook import Lorebook

from ._server import Reply
from .conftest import World


async def test_persona_precedence_turn_then_chat_then_default(world: World) -> None:
    tk, chats = world.tk, world.chats
    personas = Personas(tk.store, owner=tk.owner)
    zed = await personas.create("Zed", "{{user}} is a sailor.")
    await personas.create("Ann", "{{user}} sells tickets.")
    await personas.set_default(zed)
    info = await chats.new_chat("Mira")
    assert (await personas.for_chat(info.id)).name == "Zed"  # type: ignore[union-attr]
    await personas.set_for_chat(info.id, "Ann")
    assert (await personas.for_chat(info.id)).name == "Ann"  # type: ignore[union-attr]
    world.server.script(Reply(text="a"), Reply(text="b"))
    await chats.send(info.id, "Hi")
    sent = json.dumps(world.server.requests[-1].body)
    assert "Ann sells tickets." in sent and "sailor" not in sent
    await chats.send(info.id, "Hi", overrides={"persona": "Zed"})
    assert "Zed is a sailor." in json.dumps(world.server.requests[-1].body)
    # a locked persona deleted since: the default applies
    await tk.store.delete("persona", "Ann", owner=tk.owner)
    assert (await personas.for_chat(info.id)).name == "Zed"  # type: ignore[union-attr]
    await personas.set_for_chat(info.id, None)
    stored = await chats.load(info.id)
    assert stored.header["chat_metadata"].get("persona") is None
    with pytest.raises(NotFound, match="no persona named 'Nobody'"):
        await personas.set_for_chat(info.id, "Nobody")
    with pytest.raises(FormatError, match="needs a name"):
        await personas.create("  ")
    with pytest.raises(FormatError, match="blank"):
        await personas.set_user_name("")


async def test_authors_note_checks_every_value_before_writing(world: World) -> None:
    info = await world.chats.new_chat("Mira")
    store, owner = world.tk.store, world.tk.owner
    note = await set_authors_note(store, info.id, owner=owner, text="Be brief.", depth=2, role=1)
    assert (note.prompt, note.depth, note.role, note.interval) == ("Be brief.", 2, 1, 1)
    for bad, field in (
        ({"depth": -1}, "note_depth"),
        ({"interval": -2}, "note_interval"),
        ({"role": 5}, "note_role"),
        ({"position": 7}, "note_position"),
    ):
        with pytest.raises(FormatError) as caught:
            await set_authors_note(store, info.id, owner=owner, text="changed", **bad)
        assert caught.value.field == field
    assert await authors_note(store, info.id, owner=owner) == note
    stored = await world.chats.load(info.id)
    assert stored.header["chat_metadata"]["note_prompt"] == "Be brief."


async def test_chat_and_character_lorebooks(world: World) -> None:
    store, owner = world.tk.store, world.tk.owner
    book = Lorebook.model_validate(
        {
            "entries": {
                "0": {
                    "uid": 0,
                    "key": ["tide"],
                    "keysecondary": [],
                    "content": "Tide at nine.",
                    "constant": False,
                    "selective": False,
                    "order": 100,
                    "position": 0,
                    "disable": False,
                }
            }
        }
    )
    await store.put("lorebook", book, owner=owner, name="Ferry")
    info = await world.chats.new_chat("Mira")
    await world.chats.edit(info.id, 0, "The tide is coming in.")

    async def fires() -> bool:
        return "Tide at nine." in json.dumps(wire_body(await world.chats.preview(info.id)))

    assert not await fires()
    bound = await set_chat_lorebook(store, info.id, "Ferry", owner=owner)
    assert bound is not None and bound.name == "Ferry" and await fires()
    assert await set_chat_lorebook(store, info.id, None, owner=owner) is None
    assert not await fires()
    with pytest.raises(NotFound):
        await set_chat_lorebook(store, info.id, "Nope", owner=owner)
    char = (await store.get_record("character", "Mira", owner=owner)).info.id
    await attach_character_lorebook(store, char, "Ferry", owner=owner)
    await attach_character_lorebook(store, char, "Ferry", owner=owner)  # once only
    assert [b.name for b in await character_lorebooks(store, char, owner=owner)] == ["Ferry"]
    assert await fires()


async def test_search_finds_messages_with_every_word(world: World) -> None:
    world.server.script(Reply(text="The lamp is lit at dusk."), Reply(text="No."))
    first = await world.chats.new_chat("Mira")
    await world.chats.send(first.id, "Is the LAMP lit?")
    second = await world.chats.new_chat("Mira")
    await world.chats.send(second.id, "Lamp?")
    hits = await search_chats(world.tk.store, "lamp lit", owner=world.tk.owner)
    assert [(h.chat.id, h.position, h.name) for h in hits] == [
        (first.id, 1, "Ada"),
        (first.id, 2, "Mira"),
    ]
    assert await search_chats(world.tk.store, "  ", owner=world.tk.owner) == []
    limited = await search_chats(world.tk.store, "lamp", owner=world.tk.owner, limit=1)
    assert len(limited) == 1


async def test_undo_rewrites_only_from_the_first_changed_message(world: World) -> None:
    store, owner = world.tk.store, world.tk.owner
    world.server.script(Reply(text="One."), Reply(text="Two."))
    info = await world.chats.new_chat("Mira")
    await world.chats.send(info.id, "Hi")
    await world.chats.send(info.id, "More")
    before = await world.chats.load(info.id)
    snapshot = await take_snapshot(store, info.id, "edit", owner=owner)
    await world.chats.edit(info.id, 2, "Changed.")
    assert await restore_snapshot(store, snapshot, owner=owner) == 1
    after = await world.chats.load(info.id)
    # same rows (ids kept): one message updated in place
    assert [(m.id, m.data) for m in after.messages] == [(m.id, m.data) for m in before.messages]
    stack = UndoStack(limit=2)
    for label in ("a", "b", "delete"):
        stack.push(await take_snapshot(store, info.id, label, owner=owner))
    await world.chats.delete(info.id, 1)
    assert len(stack) == 2  # the oldest was dropped
    assert (await stack.undo(store, owner=owner)).label == "delete"
    restored = await world.chats.load(info.id)
    assert [m.data for m in restored.messages] == [m.data for m in before.messages]
    assert [m.id for m in restored.messages][:1] == [before.messages[0].id]
    stack.discard_last()
    with pytest.raises(NotFound, match="nothing to undo"):
        await stack.undo(store, owner=owner)


async def test_quick_replies_are_one_stored_set(world: World) -> None:
    replies = QuickReplies(world.tk.store, owner=world.tk.owner)
    await replies.save("hi", "Hello, {{char}}!")
    await replies.save("go", "/swipe\n/continue")
    await replies.save("hi", "Hi again.")
    assert [(r.label, r.message) for r in await replies.list()] == [
        ("go", "/swipe\n/continue"),
        ("hi", "Hi again."),
    ]
    stored = await world.tk.store.get_record("quick_reply_set", "Default", owner=world.tk.owner)
    assert stored.data["qrList"][0]["label"] == "go"  # SillyTavern's field names
    assert quick_reply_lines("/swipe\n/continue") == (True, ["/swipe", "/continue"])
    assert quick_reply_lines("See /help\nthen go") == (False, ["See /help\nthen go"])
    await replies.remove("go")
    with pytest.raises(NotFound):
        await replies.get("go")
    with pytest.raises(FormatError):
        await replies.save("two words", "x")
    with pytest.raises(FormatError):
        await replies.save("empty", " ")


async def test_characters_rename_duplicate_delete(world: World) -> None:
    library, store, owner = world.tk.library, world.tk.store, world.tk.owner
    info = await world.chats.new_chat("Mira")
    renamed = await library.rename_character("Mira", "Mirabel")
    assert renamed.name == "Mirabel"
    assert (await store.get_chat_info(info.id, owner=owner)).character_name == "Mirabel"
    copy = await library.duplicate_character("Mirabel")
    assert copy.name == "Mirabel (copy)" and copy.id != renamed.id
    with pytest.raises(Conflict):
        await library.duplicate_character("Mirabel", "Mirabel (copy)")
    with pytest.raises(FormatError):
        await library.rename_character("Mirabel", " ")
    assert await library.delete_character("Mirabel") == 0
    kept = await store.get_chat_info(info.id, owner=owner)
    assert kept.character_id is None  # the chat stays, attached to no character


async def test_check_overrides_names_the_unknown_record(world: World) -> None:
    info = await world.chats.new_chat("Mira")
    for overrides, field in (({"profile": "nope"}, "profile"), ({"persona": "nobody"}, "persona")):
        with pytest.raises(ChatTurnError) as caught:
            await world.chats.send(info.id, "lost?", overrides=overrides)
        assert caught.value.code == "invalid_input" and caught.value.details["field"] == field
    assert len((await world.chats.load(info.id)).messages) == 1
    assert world.server.requests == []
