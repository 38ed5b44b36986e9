"""Creating a chat reads what its greetings need, never the character's lorebooks: SillyTavern
scans no world info for a greeting, so a 20,000-entry book linked to the card costs a new chat
nothing. The turn that follows still scans the book."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest

from _lorebooks import tide_lorebook
from tavernkit.groups.rng import Mulberry32
from tavernkit.store.protocol import Store

from ._server import Reply
from .conftest import World

BOOK = tide_lorebook()


def _card(name: str, greeting: str) -> dict[str, Any]:
    return {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": name,
            "description": "{{char}} keeps the ferry.",
            "personality": "",
            "scenario": "",
            "first_mes": greeting,
            "mes_example": "",
            "alternate_greetings": ["Mind the {{outlet::tides}}gap, {{user}}."],
            "extensions": {"world": "Ferry lore"},
        },
    }


async def _linked_character(world: World, name: str, greeting: str) -> None:
    """``name`` with "Ferry lore" as its book: named by the card and linked in the store."""
    await world.tk.library.import_bytes(json.dumps(BOOK).encode(), source="Ferry lore.json")
    await world.tk.library.import_bytes(
        json.dumps(_card(name, greeting)).encode(), source=f"{name}.json"
    )
    await world.tk.store.link(
        "character", name, "lorebook", "lorebook", "Ferry lore", owner=world.tk.owner
    )


def _record_store_calls(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every call of the real store's public coroutine methods, with its arguments as text
    (the store still answers each: the calls are only observed)."""
    calls: list[str] = []
    for name in dir(store):
        method = getattr(store, name)
        if name.startswith("_") or not inspect.iscoroutinefunction(method):
            continue

        def observed(real: Any = method, called: str = name) -> Any:
            async def call(*args: Any, **kwargs: Any) -> Any:
                calls.append(f"{called}{args!r}{kwargs!r}")
                return await real(*args, **kwargs)

            return call

        monkeypatch.setattr(store, name, observed())
    return calls


async def test_a_new_chat_reads_no_lorebook_and_the_turn_still_scans_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _linked_character(world, "Wade", "Welcome aboard, {{user}}. I am {{char}}.")
    calls = _record_store_calls(world.tk.store, monkeypatch)

    info = await world.chats.new_chat("Wade")

    assert calls, "the store was observed"
    assert [c for c in calls if "lorebook" in c.lower()] == []
    # the greetings are rendered as before: names substituted, an outlet empty (no scan)
    stored = await world.chats.load(info.id)
    greeting = stored.messages[0].data
    assert greeting["mes"] == "Welcome aboard, Ada. I am Wade."
    assert greeting["swipes"] == ["Welcome aboard, Ada. I am Wade.", "Mind the gap, Ada."]
    # the turn loads the book and its entry reaches the model
    monkeypatch.undo()
    world.server.script(Reply(text="Nine."))
    assert (await world.chats.send(info.id, "When is the tide?")).status == "completed"
    sent = world.server.requests[-1].body["messages"]
    assert any("The tide turns at nine." in str(m["content"]) for m in sent)


async def test_a_new_group_chat_reads_no_members_lorebook(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _linked_character(world, "Wade", "*{{char}} waves at {{user}}.*")
    group = {
        "id": "g1",
        "name": "Deck",
        "members": ["Wade.png"],
        "activation_strategy": 0,
        "generation_mode": 0,
        "disabled_members": [],
        "chat_id": "",
        "chats": [],
    }
    await world.tk.library.import_bytes(json.dumps(group).encode(), source="deck.json")
    calls = _record_store_calls(world.tk.store, monkeypatch)

    info = await world.chats.new_group_chat("Deck", rng=Mulberry32(7))

    assert calls, "the store was observed"
    assert [c for c in calls if "lorebook" in c.lower()] == []
    monkeypatch.undo()
    stored = await world.chats.load(info.id)
    assert [m.data["mes"] for m in stored.messages] == ["*Wade waves at Ada.*"]
