"""Tavern.context(): selections, connection profiles, capability questions, previews, the
embedded model as the default, and the one abort type."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from generation._helpers import context, profile, setup_tavern  # tests/ is on sys.path
from tavernkit import AbortController, AbortSignal, GenerateTaskError, Tavern
from tavernkit.errors import TavernKitError
from tavernkit.generation.abort import AbortError
from tavernkit.generation.profiles import EMBEDDED_PROFILE, apply_settings_override
from tavernkit.models.profile import ConnectionProfile, CredentialRef
from tavernkit.task_errors import task_error_from


async def test_profiles_list_resolve_and_model(tmp_path: Path) -> None:
    a = profile("http://a.example/v1", name="beta", model="m-b")
    b = profile("http://b.example/v1", name="alpha", model="m-a", tools=False)
    tk, _ = await setup_tavern(tmp_path, [a, b], active="beta")
    try:
        ctx = context(tk)
        assert [p.name for p in await ctx.connection_profiles.list()] == ["alpha", "beta"]
        assert await ctx.get_chat_completion_model() == "m-b"
        resolved = await ctx.connection_profiles.resolve("alpha", model_override="m-x")
        assert resolved.model == "m-x" and resolved.family == "chat"
        assert await ctx.is_tool_calling_supported()
        assert await ctx.can_perform_tool_calls("normal")
        assert not await ctx.can_perform_tool_calls("quiet")
        with pytest.raises(GenerateTaskError) as info:
            await ctx.connection_profiles.resolve("missing")
        assert info.value.code == "invalid_input"
    finally:
        await tk.close()


async def test_embedded_model_is_the_default_profile(tmp_path: Path) -> None:
    async with Tavern(tmp_path, load_plugins=False) as tk:
        ctx = tk.context()
        resolved = await ctx.connection_profiles.resolve()
        assert resolved.profile == EMBEDDED_PROFILE
        assert resolved.api == "local" and resolved.native_json_schema
        assert await ctx.get_chat_completion_model() == "smollm2-135m-instruct"
        assert not await ctx.is_tool_calling_supported()
        # the prompt protocols still work there
        assert await ctx.can_perform_tool_calls("normal", "prompt_xml")


async def test_secrets_are_loaded_from_the_key_table_and_never_listed(tmp_path: Path) -> None:
    tk, _ = await setup_tavern(tmp_path, [])
    try:
        key_id = await tk.store.add_api_key("openai", "sk-secret-123")
        stored = ConnectionProfile(
            name="oa", source="openai", model="gpt-4o", credentials=[CredentialRef(key_id=key_id)]
        )
        await tk.store.put("connection_profile", stored, name="oa")
        ctx = context(tk)
        listed = await ctx.connection_profiles.list()
        assert "sk-secret" not in repr(listed)
        resolved = await ctx.connection_profiles.resolve("oa")
        assert resolved.provider.keys == "sk-secret-123"  # type: ignore[attr-defined]
        env = ConnectionProfile(name="e", source="openai", credentials=[CredentialRef(env="K")])
        await tk.store.put("connection_profile", env, name="e")
        ctx2 = context(tk, environ={"K": "from-env"})
        assert (await ctx2.connection_profiles.resolve("e")).provider.keys == "from-env"  # type: ignore[attr-defined]
    finally:
        await tk.close()


def test_settings_override_beats_the_profile() -> None:
    base = ConnectionProfile(name="p", source="openai", model="a")
    over = apply_settings_override(
        base, {"chat_completion_source": "custom", "custom_url": "http://x", "openai_model": "b"}
    )
    assert (over.source, over.base_url, over.model) == ("custom", "http://x", "b")
    with pytest.raises(GenerateTaskError) as info:
        apply_settings_override(base, {"nonsense": 1})
    assert info.value.code == "invalid_input"


async def test_prompt_preview_without_sending(tmp_path: Path) -> None:
    tk, _ = await setup_tavern(tmp_path, [profile("http://127.0.0.1:9/v1")])
    try:
        messages = await context(tk).build_preset_aware_prompt_messages(
            [{"role": "user", "content": "Hello {{char}}"}]
        )
        bare = await context(tk).build_preset_aware_prompt_messages(
            [{"role": "user", "content": "Hello {{char}}"}], include_character_card=False
        )
    finally:
        await tk.close()
    assert messages[-1] == {"role": "user", "content": "Hello Mira"}
    assert any("lighthouse keeper" in str(m["content"]) for m in messages)
    assert not any("lighthouse keeper" in str(m["content"]) for m in bare)


async def test_abort_signal_semantics() -> None:
    controller = AbortController()
    signal = controller.signal
    fired: list[object] = []
    signal.add_listener(lambda s: fired.append(s.reason))
    linked = AbortSignal.any(None, signal)
    waiter = asyncio.ensure_future(signal.wait())
    await asyncio.sleep(0)
    assert not signal.is_set() and not waiter.done()
    assert controller.abort("user")
    assert not controller.abort("again")
    assert await waiter and signal.aborted and linked.aborted
    assert fired == ["user"] and signal.reason == "user"
    with pytest.raises(AbortError) as info:
        signal.throw_if_aborted()
    assert task_error_from(info.value).code == "aborted"


async def test_card_edit_proposes_literal_macro_edits_and_applies_them(tmp_path: Path) -> None:
    from generation._scripted_server import Reply, ScriptedServer
    from tavernkit.assist.card_edit import apply_edits, propose_edits
    from tavernkit.models.character import Card

    new = "Mira keeps the lighthouse and teases {{user}} about the weather."
    reply = Reply(
        text="One change.",
        tool_calls=[("propose_edit", {"field": "description", "new_value": new, "reason": "r"})],
    )
    async with ScriptedServer([reply]) as server:
        tk, _ = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")])
        try:
            card = await tk.store.get("character", "Mira")
            assert isinstance(card, Card)
            edits, text = await propose_edits(context(tk), card, "Make her teasing.")
            assert [(e.field, e.new) for e in edits] == [("description", new)]
            assert "+Mira keeps the lighthouse" in edits[0].diff()
            await apply_edits(tk.runtime, "Mira", edits)
            stored = await tk.store.get("character", "Mira")
        finally:
            await tk.close()
    sent = server.requests[0].body["messages"]
    # the card's macros reached the model literally
    assert "talks to {{user}}" in sent[-1]["content"]
    assert isinstance(stored, Card) and stored.data.description == new
    assert text == "One change."


async def test_the_services_take_the_runtime_and_name_the_call_for_a_tavern(
    tmp_path: Path,
) -> None:
    from tavernkit.chat.service import ChatService
    from tavernkit.context import TavernContext

    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        with pytest.raises(TypeError, match=r"ChatService\(tk\.runtime"):
            ChatService(tk)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"TavernContext\(tk\.runtime"):
            TavernContext(tk)  # type: ignore[arg-type]
        assert tk.chats.runtime is tk.runtime
        assert tk.context("c1").runtime is tk.runtime
        assert tk.runtime.store is tk.store
    with pytest.raises(TavernKitError, match="not open"):
        tk.runtime.store  # noqa: B018
