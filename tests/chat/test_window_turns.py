"""A turn loads the chat's tail, and builds exactly what a build over the whole chat builds.

Each case prepares the same turn twice through the store: once with a window larger than the
chat (the whole chat, plain lists) and once starting from a window of a few messages, which the
build outgrows (the retry path) or does not (the budget stops it inside). The requests, prompts
and world-info results must be equal.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tavernkit.chat import ChatService
from tavernkit.chat.prepare import PreparedTurn
from tavernkit.facade import Tavern
from tavernkit.models.chat_window import MessageWindow, OutsideWindow
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.profile import ConnectionProfile
from tavernkit.models.settings import Settings
from tavernkit.store.chat_state import load_chat_state
from tavernkit.store.chat_window import windows

from ._server import HangingServer
from .conftest import StepClock, make_world

WORDS = [
    "ferry",
    "harbour",
    "lantern",
    "storm",
    "rope",
    "tide",
    "gull",
    "captain",
    "ticket",
    "bell",
    "fog",
    "island",
]


def _messages(count: int, rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"name": "Mira", "is_user": False, "mes": "Welcome aboard, {{user}}.", "extra": {}}
    ]
    for i in range(1, count):
        user = i % 3 != 0
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 30)))
        message: dict[str, Any] = {
            "name": "Ada" if user else "Mira",
            "is_user": user,
            "is_system": i % 7 == 0,  # hidden messages, some of them in the gap
            "mes": text,
            "extra": {},
        }
        if i % 11 == 0:
            message["extra"] = {"reasoning": "thinking about " + rng.choice(WORDS)}
        if not user:
            message.update(swipes=[text, text + " (again)"], swipe_id=0)
        out.append(message)
    return out


def _book() -> dict[str, Any]:
    entries = {}
    for uid, word in enumerate(WORDS):
        entries[str(uid)] = {
            "uid": uid,
            "key": [word],
            "keysecondary": [],
            "content": f"About the {word}.",
            "constant": False,
            "selective": True,
            "order": uid,
            "position": uid % 5,
            "disable": False,
            "depth": 2,
            "probability": 60,
            "useProbability": True,
            # active only when the scan counts 280 visible messages: the chat has 258 (300 less
            # the hidden), so a window that counted the hidden ones it skipped would fire it
            "delay": 280 if uid == 3 else None,
            "sticky": 2 if uid == 4 else None,
        }
    return {"entries": entries}


@pytest.fixture
def fresh_windows() -> Iterator[None]:
    first = windows.first
    windows.clear()
    yield
    windows.first = first
    windows.clear()


@pytest.fixture
async def tavern(tmp_path: Path, fresh_windows: None) -> AsyncIterator[tuple[Tavern, str]]:
    async with HangingServer() as server:
        tk = await make_world(tmp_path / "home", server)
        try:
            await tk.store.put("lorebook", _book(), name="harbour")
            info = await tk.store.create_chat(
                {"user_name": "Ada", "character_name": "Mira", "chat_metadata": {}},
                _messages(300, random.Random(5)),
                name="long",
                character="Mira",
            )
            yield tk, info.id
        finally:
            await tk.close()


async def _configure(tk: Tavern, case: str) -> None:
    settings = await tk.store.get_settings()
    assert isinstance(settings, Settings)
    settings.world_info.global_books = ["harbour"]
    settings.world_info.depth = 4
    settings.reasoning.add_to_prompts = True
    settings.reasoning.max_additions = 2
    if case == "min_activations":
        settings.world_info.min_activations = 30  # widens the scan until the chat runs out
    if case == "text":
        profile = ConnectionProfile(
            name="text", api="text", source="openai", base_url="http://127.0.0.1:9/v1", model="m1"
        )
        await tk.store.put("connection_profile", profile)
        settings.selections.profile = "text"
        settings.prompt.max_context = 900
    if case == "small_context":
        preset = ChatCompletionPreset(openai_max_context=700, openai_max_tokens=100)
        await tk.store.put("chat_preset", preset, name="small")
        settings.selections.chat_preset = "small"
    await tk.store.put_settings(settings)
    chats = await tk.store.list_chats()
    header = (await tk.store.load_chat_window(chats[0].id, last=1)).header
    metadata = header.get("chat_metadata", {})
    metadata.update(note_prompt="Keep it short.", note_interval=3, note_depth=2)
    await tk.store.update_chat_metadata(chats[0].id, metadata)


async def _preview(tk: Tavern, chat_id: str, kind: str, first: int) -> PreparedTurn:
    windows.clear()
    windows.first = first
    service = ChatService(tk, clock=StepClock(), rng=random.Random(11).random)
    return await service.preview(chat_id, kind=kind)


@pytest.mark.parametrize("case", ["default", "small_context", "min_activations", "text"])
@pytest.mark.parametrize("kind", ["normal", "swipe", "regenerate", "continue", "impersonate"])
async def test_a_windowed_turn_builds_what_the_whole_chat_builds(
    tavern: tuple[Tavern, str], case: str, kind: str
) -> None:
    tk, chat_id = tavern
    await _configure(tk, case)
    whole = await _preview(tk, chat_id, kind, first=10_000)
    assert not isinstance(whole.state.chat.messages, MessageWindow)  # type: ignore[union-attr]
    for first in (3, 40):
        part = await _preview(tk, chat_id, kind, first=first)
        assert part.request == whole.request
        assert part.prompt == whole.prompt
        assert part.wi == whole.wi
        assert part.changed_local_variables() == whole.changed_local_variables()


async def test_the_budget_stops_inside_the_window_so_the_tail_is_all_that_is_read(
    tavern: tuple[Tavern, str],
) -> None:
    tk, chat_id = tavern
    await _configure(tk, "small_context")
    part = await _preview(tk, chat_id, "normal", first=60)
    assert windows.start(chat_id) == 60  # no retry: the 60 newest messages were enough
    messages = part.state.chat.messages  # type: ignore[union-attr]
    assert isinstance(messages, MessageWindow) and not messages.complete
    assert len(messages) == 300 and len(messages.tail) == 60
    with pytest.raises(OutsideWindow):
        messages[100]
    assert part.request == (await _preview(tk, chat_id, "normal", first=10_000)).request


async def test_a_build_that_reads_past_the_window_grows_it_for_the_next_turn(
    tavern: tuple[Tavern, str],
) -> None:
    tk, chat_id = tavern
    await _configure(tk, "text")  # the text builder reads every message
    await _preview(tk, chat_id, "normal", first=3)
    assert windows.start(chat_id) >= 300


async def test_the_window_counts_what_it_did_not_load(tavern: tuple[Tavern, str]) -> None:
    tk, chat_id = tavern
    whole = await tk.store.load_chat(chat_id)
    window = await tk.store.load_chat_window(chat_id, last=50)
    assert [m.data for m in window.tail] == [m.data for m in whole.messages[-50:]]
    assert [m.data for m in window.head] == [whole.messages[0].data]  # the first is visible
    skipped = [m.data for m in whole.messages[1:-50]]
    assert window.gap.total == len(skipped) == 249
    assert window.gap.hidden == sum(1 for m in skipped if m["is_system"])
    assert window.gap.user == sum(1 for m in skipped if m["is_user"])
    state = await load_chat_state(tk.store, chat_id=chat_id, window=50)
    assert len(state.messages) == 300
    assert state.messages[-1].mes == whole.messages[-1].data["mes"]
    assert state.messages[0].mes == "Welcome aboard, {{user}}."


async def test_edits_keep_the_counts_of_the_window(tavern: tuple[Tavern, str]) -> None:
    tk, chat_id = tavern
    whole = await tk.store.load_chat(chat_id)
    before = (await tk.store.load_chat_window(chat_id, last=10)).gap
    target = whole.messages[100]
    assert not target.data["is_system"] and target.data["is_user"]
    await tk.store.update_message(target.id, {**target.data, "is_system": True, "is_user": False})
    after = (await tk.store.load_chat_window(chat_id, last=10)).gap
    assert (after.hidden, after.user) == (before.hidden + 1, before.user - 1)
    await tk.store.append_message(chat_id, {"name": "Ada", "is_user": True, "mes": "More."})
    await tk.store.truncate_chat(chat_id, 250)
    window = await tk.store.load_chat_window(chat_id, last=10)
    assert len(window.head) + window.gap.total + len(window.tail) == 250
    kept = [m.data for m in (await tk.store.load_chat(chat_id)).messages[1:-10]]
    assert window.gap.user == sum(1 for m in kept if m["is_user"])


async def test_turns_share_their_token_counts(tavern: tuple[Tavern, str]) -> None:
    from tavernkit.chat.prepare import _tokenizer

    tk, chat_id = tavern
    await _configure(tk, "default")
    counter = _tokenizer("openai", "m1", 0)
    counter.clear()
    before = counter.misses
    await _preview(tk, chat_id, "normal", first=10_000)
    first_turn = counter.misses - before
    await _preview(tk, chat_id, "normal", first=10_000)
    second_turn = counter.misses - before - first_turn
    assert first_turn > 50 and second_turn < first_turn / 10


async def test_a_window_shares_unchanged_messages_and_rereads_edited_ones(
    tavern: tuple[Tavern, str],
) -> None:
    tk, chat_id = tavern
    first = await load_chat_state(tk.store, chat_id=chat_id, window=20)
    again = await load_chat_state(tk.store, chat_id=chat_id, window=20)
    assert again.messages[-2] is first.messages[-2]  # validated once, shared by turns
    last = (await tk.store.load_chat(chat_id)).messages[-1]
    await tk.store.update_message(last.id, {**last.data, "mes": "Edited."})
    edited = await load_chat_state(tk.store, chat_id=chat_id, window=20)
    assert edited.messages[-1].mes == "Edited."
    assert edited.messages[-1] is not first.messages[-1]


@pytest.mark.parametrize("text", ["Plain words.", "{{char}}, with a macro."])
async def test_a_user_message_is_stored_under_the_persona_that_applies(
    tavern: tuple[Tavern, str], text: str
) -> None:
    """Typed text without a macro takes the short path (no chat state); the name it is stored
    under follows the same precedence as a full load: the turn's, the chat's, the default."""
    from tavernkit.chat.personas import Personas
    from tavernkit.generation.abort import AbortController

    tk, chat_id = tavern
    personas = Personas(tk.store, owner=tk.owner)
    await personas.create("Zed")
    await personas.create("Ann")
    await personas.set_default("Zed")
    service = ChatService(tk, clock=StepClock())
    controller = AbortController()
    controller.abort()  # the reply is not the point: the turn stops before any request
    names = []
    for lock, override in ((None, None), ("Ann", None), ("Ann", "Zed")):
        await personas.set_for_chat(chat_id, lock)
        overrides = {"persona": override} if override else None
        await service.send(chat_id, text, overrides=overrides, abort=controller.signal)
        stored = await tk.store.load_chat(chat_id)
        user = next(m for m in reversed(stored.messages) if m.data.get("is_user"))
        names.append(user.data["name"])
    assert names == ["Zed", "Ann", "Zed"]
