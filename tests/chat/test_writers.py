"""Writers and the utility profile on real turns (one scripted upstream; each profile names a
model of its own, so the request's ``model`` says which profile sent it).

- A character's writer (``data.extensions.tavernkit.writer``) picks its turns' profile and
  preset: the turn's own override > the writer > the user's selection; a group member speaks
  through its own writer; a writer naming a profile or preset that is not stored fails the
  turn naming the character, the part and the name, and nothing is sent.
- The utility profile runs side tasks (summaries, ``generate_task(side_task=True)``, an
  inherited reviewer); without one they run on the selected profile; a utility profile that
  is not stored is an error naming it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tavernkit.assist.summary import summarize
from tavernkit.errors import ChatTurnError, GenerateTaskError
from tavernkit.groups.rng import Mulberry32
from tavernkit.models.memory import SummarySettings
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.profile import ConnectionProfile, ReviewSettings

from ._server import Reply
from .conftest import World


async def _profile(world: World, name: str, model: str, **fields: Any) -> None:
    profile = ConnectionProfile(
        name=name,
        source="openai",
        base_url=world.server.base_url + "/v1",
        model=model,
        **fields,
    )
    await world.tk.store.put("connection_profile", profile)


async def _set_writer(world: World, character: str, **writer: str | None) -> None:
    stored = await world.tk.store.get_record("character", character)
    card = json.loads(json.dumps(stored.data))
    card["data"]["extensions"]["tavernkit"] = {"writer": writer}
    await world.tk.store.put("character", card, id=stored.info.id, name=stored.info.name)


async def _set_utility(world: World, name: str | None) -> None:
    settings = await world.tk.settings()
    settings.selections.utility_profile = name
    await world.tk.store.put_settings(settings)


def _models(world: World) -> list[str]:
    return [str(r.body["model"]) for r in world.server.requests]


async def test_a_characters_writer_profile_and_preset_answer_its_turns(world: World) -> None:
    await _profile(world, "storyteller", "m-writer")
    store = world.tk.store
    await store.put("chat_preset", ChatCompletionPreset(name="selected", temperature=0.75))
    await store.put("chat_preset", ChatCompletionPreset(name="prose", temperature=0.25))
    settings = await world.tk.settings()
    settings.selections.chat_preset = "selected"
    await store.put_settings(settings)
    await _set_writer(world, "Mira", profile="storyteller", preset="prose")
    world.server.script(Reply(text="Aye."))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "Ready?")
    assert out.status == "completed", out.error
    body = world.server.requests[0].body
    assert (body["model"], body["temperature"]) == ("m-writer", 0.25)


async def test_the_writer_preset_wins_over_the_profiles_bound_preset(world: World) -> None:
    store = world.tk.store
    await store.put("chat_preset", ChatCompletionPreset(name="bound", temperature=1.5))
    await store.put("chat_preset", ChatCompletionPreset(name="prose", temperature=0.25))
    await _profile(world, "storyteller", "m-writer", chat_preset="bound")
    await _set_writer(world, "Mira", profile="storyteller", preset="prose")
    world.server.script(Reply(text="Aye."))
    info = await world.chats.new_chat("Mira")
    assert (await world.chats.send(info.id, "Ready?")).status == "completed"
    assert world.server.requests[0].body["temperature"] == 0.25


async def test_the_turns_override_wins_then_the_writer_then_the_selection(
    world: World,
) -> None:
    await _profile(world, "storyteller", "m-writer")
    await _profile(world, "asked", "m-asked")
    info = await world.chats.new_chat("Mira")
    world.server.script(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    assert (await world.chats.send(info.id, "a")).status == "completed"  # the selection
    await _set_writer(world, "Mira", profile="storyteller")
    assert (await world.chats.send(info.id, "b")).status == "completed"  # the writer
    out = await world.chats.send(info.id, "c", overrides={"profile": "asked"})
    assert out.status == "completed", out.error
    assert _models(world) == ["m1", "m-writer", "m-asked"]


async def test_a_writer_naming_a_deleted_profile_fails_naming_it(world: World) -> None:
    await _profile(world, "storyteller", "m-writer")
    await _set_writer(world, "Mira", profile="storyteller")
    await world.tk.store.delete("connection_profile", "storyteller")
    info = await world.chats.new_chat("Mira")
    with pytest.raises(ChatTurnError) as caught:
        await world.chats.send(info.id, "Ready?")
    error = caught.value
    assert error.code == "invalid_input"
    assert "'Mira'" in error.message and "'storyteller'" in error.message
    assert error.details["field"] == "data.extensions.tavernkit.writer.profile"
    assert world.server.requests == []  # never a silent fall back to the selected profile


async def test_a_writer_naming_a_missing_preset_fails_naming_it(world: World) -> None:
    await _set_writer(world, "Mira", preset="gone")
    info = await world.chats.new_chat("Mira")
    with pytest.raises(ChatTurnError) as caught:
        await world.chats.send(info.id, "Ready?")
    assert "'gone'" in caught.value.message and "preset" in caught.value.message
    assert caught.value.details["field"] == "data.extensions.tavernkit.writer.preset"
    assert world.server.requests == []


async def _stored_texts(world: World, chat: str) -> list[str]:
    return [str(m.data["mes"]) for m in (await world.chats.load(chat)).messages]


@pytest.mark.parametrize("how", ["deleted", "no base URL"])
async def test_a_writer_it_cannot_use_refuses_the_turn_before_the_message_is_stored(
    world: World, how: str
) -> None:
    await _set_writer(world, "Mira", profile="storyteller")
    if how == "deleted":
        await _profile(world, "storyteller", "m-writer")
        await world.tk.store.delete("connection_profile", "storyteller")
    else:  # stored, but its source has no default address and it names none
        broken = ConnectionProfile(name="storyteller", source="custom", model="m-writer")
        await world.tk.store.put("connection_profile", broken)
    info = await world.chats.new_chat("Mira")
    before = await _stored_texts(world, info.id)
    with pytest.raises(ChatTurnError) as caught:
        await world.chats.send(info.id, "Ready?")
    assert "'Mira'" in caught.value.message and "'storyteller'" in caught.value.message
    assert caught.value.details["field"] == "data.extensions.tavernkit.writer.profile"
    assert await _stored_texts(world, info.id) == before  # "Ready?" was not stored
    with pytest.raises(ChatTurnError):
        await world.chats.regenerate(info.id, at=1)
    assert await _stored_texts(world, info.id) == before
    assert (await world.chats.tree(info.id)).branches[1:] == []  # no branch started either
    assert world.server.requests == []


def _member(name: str) -> dict[str, Any]:
    return {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": name,
            "description": f"{name} travels.",
            "first_mes": "Hi.",
            "extensions": {},
        },
    }


async def test_a_group_member_speaks_through_its_own_writer(world: World) -> None:
    for name in ("Alice", "Bob"):
        await world.tk.library.import_bytes(json.dumps(_member(name)).encode(), source="c.json")
    group = {"id": "g1", "name": "Camp", "members": ["Alice.png", "Bob.png"]}
    group |= {"activation_strategy": 1, "generation_mode": 0, "chat_id": "", "chats": []}
    await world.tk.library.import_bytes(json.dumps(group).encode(), source="camp.json")
    await _profile(world, "bard", "m-bob")
    await _set_writer(world, "Bob", profile="bard")
    chat = await world.chats.new_group_chat("Camp", rng=Mulberry32(7))
    world.server.script(Reply(text="Alice here."), Reply(text="Bob here."))
    out = await world.chats.group_turn(chat.id, text="Report in.")
    assert out.status == "completed"
    assert [r.name for r in out.replies] == ["Alice", "Bob"]
    assert _models(world) == ["m1", "m-bob"]


async def test_a_group_members_writer_it_cannot_use_refuses_the_turn_up_front(
    world: World,
) -> None:
    for name in ("Alice", "Bob"):
        await world.tk.library.import_bytes(json.dumps(_member(name)).encode(), source="c.json")
    group = {"id": "g1", "name": "Camp", "members": ["Alice.png", "Bob.png"]}
    group |= {"activation_strategy": 1, "generation_mode": 0, "chat_id": "", "chats": []}
    await world.tk.library.import_bytes(json.dumps(group).encode(), source="camp.json")
    await _set_writer(world, "Bob", profile="bard")  # no such profile
    chat = await world.chats.new_group_chat("Camp", rng=Mulberry32(7))
    before = await _stored_texts(world, chat.id)
    with pytest.raises(ChatTurnError) as caught:
        await world.chats.group_turn(chat.id, text="Report in.")
    assert "'Bob'" in caught.value.message and "'bard'" in caught.value.message
    # Alice, who speaks first, did not reply either: nothing was written or sent
    assert await _stored_texts(world, chat.id) == before
    assert world.server.requests == []


async def _chat_with_talk(world: World) -> str:
    info = await world.chats.new_chat("Mira")
    world.server.script(Reply(text="Aye, welcome."))
    assert (await world.chats.send(info.id, "Evening.")).status == "completed"
    return info.id


async def test_a_summary_runs_on_the_utility_profile(world: World) -> None:
    chat = await _chat_with_talk(world)
    await _profile(world, "helper", "m-utility")
    await _set_utility(world, "helper")
    world.server.script(Reply(text="They met on the ferry."))
    settings = SummarySettings(prompt_builder=1)
    update = await summarize(world.tk.context(chat), force=True, settings=settings)
    assert update is not None and update.text == "They met on the ferry."
    assert _models(world) == ["m1", "m-utility"]


async def test_without_a_utility_profile_a_summary_runs_on_the_selected_one(
    world: World,
) -> None:
    chat = await _chat_with_talk(world)
    world.server.script(Reply(text="They met."))
    await summarize(world.tk.context(chat), force=True, settings=SummarySettings(prompt_builder=1))
    assert _models(world) == ["m1", "m1"]


async def test_a_side_task_runs_on_the_utility_profile_and_other_tasks_do_not(
    world: World,
) -> None:
    await _profile(world, "helper", "m-utility")
    await _set_utility(world, "helper")
    info = await world.chats.new_chat("Mira")
    ctx = world.tk.context(info.id)
    task = [{"role": "user", "content": "Translate: bonjour."}]
    world.server.script(Reply(text="hello"), Reply(text="hello"), Reply(text="hello"))
    await ctx.generate_task(task, side_task=True)
    await ctx.generate_task(task)
    await ctx.generate_task(task, side_task=True, api_preset_name="scripted")  # named wins
    assert _models(world) == ["m-utility", "m1", "m1"]


async def test_a_utility_profile_that_is_not_stored_is_named(world: World) -> None:
    await _set_utility(world, "gone")
    info = await world.chats.new_chat("Mira")
    with pytest.raises(GenerateTaskError) as caught:
        await world.tk.context(info.id).generate_task(
            [{"role": "user", "content": "x"}], side_task=True
        )
    assert caught.value.code == "invalid_input" and "'gone'" in caught.value.message
    assert caught.value.details["field"] == "utility_profile"
    assert world.server.requests == []


async def test_an_inherited_reviewer_runs_on_the_utility_profile(world: World) -> None:
    await _profile(world, "helper", "m-utility")
    await _set_utility(world, "helper")
    verdict = json.dumps({"verdict": "pass", "findings": []})
    world.server.script(Reply(text="Aboard."), Reply(text=verdict))
    info = await world.chats.new_chat("Mira")
    await world.chats.set_review(info.id, ReviewSettings())
    out = await world.chats.send(info.id, "Can I board?")
    assert out.text == "Aboard."
    assert _models(world) == ["m1", "m-utility"]
