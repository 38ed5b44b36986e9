"""A profile's own completion preset (``profile add --preset``) samples that profile's turns;
a per-request ``llm_preset_name`` still overrides it (brief 000: connection and preset are
resolved apart)."""

from __future__ import annotations

import pytest

from tavernkit.errors import ChatTurnError
from tavernkit.models.preset import ChatCompletionPreset

from ._server import Reply
from .conftest import World, use_profile


async def _presets(world: World) -> None:
    store = world.tk.store
    await store.put("chat_preset", ChatCompletionPreset(name="bound", temperature=0.25))
    await store.put("chat_preset", ChatCompletionPreset(name="selected", temperature=0.75))
    await store.put("chat_preset", ChatCompletionPreset(name="asked", temperature=1.5))
    settings = await world.tk.settings()
    settings.selections.chat_preset = "selected"
    await store.put_settings(settings)


async def test_chat_turn_samples_with_the_profiles_bound_preset(world: World) -> None:
    await _presets(world)
    await use_profile(world, "bound-profile", model="m1", chat_preset="bound")
    world.server.script(Reply(text="Aye."))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "Ready?")
    assert out.status == "completed", out.error
    assert world.server.requests[0].body["temperature"] == 0.25


async def test_a_profile_without_a_preset_keeps_the_selected_one(world: World) -> None:
    await _presets(world)
    await use_profile(world, "plain", model="m1")
    world.server.script(Reply(text="Aye."))
    info = await world.chats.new_chat("Mira")
    assert (await world.chats.send(info.id, "Ready?")).status == "completed"
    assert world.server.requests[0].body["temperature"] == 0.75


async def test_generate_task_uses_the_bound_preset_and_llm_preset_name_overrides(
    world: World,
) -> None:
    await _presets(world)
    await use_profile(world, "bound-profile", model="m1", chat_preset="bound")
    world.server.script(Reply(text="one"), Reply(text="two"))
    info = await world.chats.new_chat("Mira")
    ctx = world.tk.context(info.id)
    task = [{"role": "user", "content": "Sum up."}]
    assert (await ctx.generate_task(task)).assistant_text == "one"
    assert (await ctx.generate_task(task, llm_preset_name="asked")).assistant_text == "two"
    temps = [r.body["temperature"] for r in world.server.requests]
    assert temps == [0.25, 1.5]


async def test_a_binding_to_a_missing_preset_names_profile_and_preset(world: World) -> None:
    await use_profile(world, "dangling", model="m1", chat_preset="gone")
    info = await world.chats.new_chat("Mira")
    with pytest.raises(ChatTurnError) as caught:
        await world.chats.send(info.id, "Ready?")
    assert caught.value.code == "invalid_input"
    assert "'dangling'" in str(caught.value) and "'gone'" in str(caught.value)
    assert world.server.requests == []
