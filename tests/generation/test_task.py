"""generate_task end to end against a scripted OpenAI/Anthropic-compatible server on 127.0.0.1:
text, validation, profiles and presets, world info, macros, usage and every error code."""

from __future__ import annotations

from pathlib import Path

import pytest

from tavernkit import AbortController, GenerateTaskError
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.preset import ChatCompletionPreset

from ._helpers import context, profile, setup_tavern
from ._scripted_server import Reply, ScriptedServer

USER = [{"role": "user", "content": "Translate 'hello' to French."}]


async def test_text_task_returns_normalized_result(tmp_path: Path) -> None:
    async with ScriptedServer([Reply(text="Bonjour.", reasoning="easy")]) as server:
        tk, _ = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")])
        try:
            result = await context(tk).generate_task(USER)
        finally:
            await tk.close()
    assert result.assistant_text == "Bonjour."
    assert result.reasoning == "easy"
    assert result.finish_reason == "stop"
    assert result.usage == {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
    assert result.tool_calls == [] and result.json_data is None
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.body["model"] == "scripted-model"
    assert sent.body["messages"][-1] == {"role": "user", "content": USER[0]["content"]}
    # the card went into the envelope, with {{user}} substituted
    assert any(
        "lighthouse keeper who talks to Ada" in str(m["content"]) for m in sent.body["messages"]
    )


async def _run(tmp_path: Path, replies: list[Reply], **kw: object) -> tuple[object, ScriptedServer]:
    async with ScriptedServer(replies) as server:
        tk, chat_id = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")])
        try:
            result = await context(tk, chat_id).generate_task(USER, **kw)  # type: ignore[arg-type]
        finally:
            await tk.close()
    return result, server


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"tools": [{"name": "t"}], "json_schema": {"type": "object"}}, "tools"),
        ({"world_info_source": "custom"}, "custom_world_info_messages"),
        ({"world_info_source": "everything"}, "world_info_source"),
        ({"function_call_mode": "telepathy"}, "function_call_mode"),
        ({"tool_choice": 42}, "tool_choice"),
        ({"json_schema": {"type": "no-such-type"}}, "json_schema"),
        ({"function_call_options": {"protocol_style": "poem"}}, None),
    ],
)
async def test_validation_runs_first_and_sends_nothing(
    tmp_path: Path, kwargs: dict[str, object], field: str | None
) -> None:
    async with ScriptedServer() as server:
        tk, _ = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")])
        try:
            with pytest.raises(GenerateTaskError) as info:
                await context(tk).generate_task(USER, **kwargs)  # type: ignore[arg-type]
            with pytest.raises(GenerateTaskError):
                context(tk).generate_task_stream(USER, **kwargs)  # type: ignore[arg-type]
        finally:
            await tk.close()
    assert info.value.code == "invalid_input"
    if field:
        assert info.value.details["field"].startswith(field)
    assert server.requests == []


async def test_chat_world_info_needs_a_chat(tmp_path: Path) -> None:
    with pytest.raises(GenerateTaskError) as info:
        await _run(tmp_path, [Reply(text="x")], world_info_source="chat")
    assert info.value.code == "invalid_input"


async def test_profile_and_preset_resolve_separately_and_combine(tmp_path: Path) -> None:
    async with ScriptedServer([Reply(text="A")]) as one, ScriptedServer([Reply(text="B")]) as two:
        tk, _ = await setup_tavern(
            tmp_path,
            [profile(one.base_url + "/v1", name="one"), profile(two.base_url + "/v1", name="two")],
        )
        await tk.store.put(
            "chat_preset",
            ChatCompletionPreset.create(
                temperature=0.25, openai_max_tokens=77, stream_openai=False
            ),
            name="low-temp",
        )
        ctx = context(tk)
        try:
            default = await ctx.generate_task(USER)
            chosen = await ctx.generate_task(
                USER, api_preset_name="two", llm_preset_name="low-temp", model_override="m2"
            )
            for bad in ({"api_preset_name": "nope"}, {"llm_preset_name": "nope"}):
                with pytest.raises(GenerateTaskError) as info:
                    await ctx.generate_task(USER, **bad)  # type: ignore[arg-type]
                assert info.value.code == "invalid_input"
        finally:
            await tk.close()
    assert (default.assistant_text, chosen.assistant_text) == ("A", "B")
    assert len(one.requests) == 1 and len(two.requests) == 1
    body = two.requests[0].body
    assert body["model"] == "m2"
    assert body["temperature"] == 0.25 and body["max_tokens"] == 77
    assert one.requests[0].body["temperature"] == 1


def _book() -> Lorebook:
    book = Lorebook()
    book.new_entry(keys=["lighthouse"], content="LORE: the lamp is green.")
    book.new_entry(keys=["harbor"], content="LORE: the harbor froze.", triggers=["normal"])
    return book


async def _wi_prompt(tmp_path: Path, **kw: object) -> str:
    async with ScriptedServer([Reply(text="ok")]) as server:
        tk, _ = await setup_tavern(
            tmp_path, [profile(server.base_url + "/v1")], books={"World": _book()}
        )
        try:
            await context(tk).generate_task(
                [{"role": "user", "content": "Tell me about the lighthouse and the harbor."}],
                include_character_card=False,
                **kw,  # type: ignore[arg-type]
            )
        finally:
            await tk.close()
    return str(server.requests[0].body["messages"])


async def test_world_info_sources(tmp_path: Path) -> None:
    none = await _wi_prompt(tmp_path / "a")
    task = await _wi_prompt(tmp_path / "b", world_info_source="task")
    normal = await _wi_prompt(tmp_path / "c", world_info_source="task", world_info_type="normal")
    custom = await _wi_prompt(
        tmp_path / "d",
        world_info_source="custom",
        custom_world_info_messages=[{"role": "user", "content": "the harbor"}],
        world_info_type="normal",
    )
    assert "LORE" not in none
    # type "quiet" filters out the entry that only triggers on normal generations
    assert "lamp is green" in task and "harbor froze" not in task
    assert "lamp is green" in normal and "harbor froze" in normal
    assert "harbor froze" in custom and "lamp is green" not in custom


async def test_runtime_world_info_snapshot_is_reused_unless_resimulated(tmp_path: Path) -> None:
    async with ScriptedServer([Reply(text="ok")]) as server:
        tk, _ = await setup_tavern(
            tmp_path, [profile(server.base_url + "/v1")], books={"World": _book()}
        )
        ctx = context(tk)
        try:
            wi = await ctx.resolve_world_info_for_messages(
                [{"role": "user", "content": "the lighthouse"}]
            )
            assert wi.activated_keys and "lamp is green" in wi.before + wi.after
            await ctx.generate_task(USER, runtime_world_info=wi)
            await ctx.generate_task(USER, runtime_world_info=wi.to_st())  # through JSON
            await ctx.generate_task(USER, runtime_world_info=wi, force_world_info_resimulate=True)
        finally:
            await tk.close()
    prompts = [str(r.body["messages"]) for r in server.requests]
    assert "lamp is green" in prompts[0] and "lamp is green" in prompts[1]
    assert "lamp is green" not in prompts[2]  # resimulated with source "none"


async def test_macros_in_task_messages_skip_side_effects(tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "Hi {{user}} {{setvar::x::1}}{{getvar::x}}!"}]
    async with ScriptedServer([Reply(text="ok")]) as server:
        tk, _ = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")])
        ctx = context(tk)
        try:
            await ctx.generate_task(messages)
            await ctx.generate_task(messages, substitute_macros=False)
        finally:
            await tk.close()
    first, second = (r.body["messages"] for r in server.requests)
    assert first[-1]["content"] == "Hi Ada !"
    assert second[-1]["content"] == messages[0]["content"]
    # the envelope (the card) is evaluated either way
    for sent in (first, second):
        assert any("talks to Ada" in str(m["content"]) for m in sent)


async def test_without_character_card(tmp_path: Path) -> None:
    _, server = await _run(tmp_path, [Reply(text="ok")], include_character_card=False)
    assert "lighthouse keeper" not in str(server.requests[0].body["messages"])


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (
            Reply(status=401, error={"error": {"message": "bad key", "type": "auth"}}),
            "auth_missing",
        ),
        (
            Reply(
                status=429, error={"error": {"message": "slow down"}}, headers={"retry-after": "7"}
            ),
            "rate_limit",
        ),
        (Reply(status=503, error={"error": {"message": "busy"}}), "network"),
        (
            Reply(status=400, error={"error": {"message": "bad", "code": "invalid_request"}}),
            "invalid_input",
        ),
        (Reply(text=""), "no_response"),
        (Reply(text="   ", usage=(3, 1)), "no_response"),
        (Reply(text="hello", usage=(3, 0)), "no_response"),
    ],
)
async def test_error_codes_from_typed_provider_errors(
    tmp_path: Path, reply: Reply, code: str
) -> None:
    with pytest.raises(GenerateTaskError) as info:
        await _run(tmp_path, [reply])
    assert info.value.code == code
    if code == "rate_limit":
        assert info.value.details["retry_after"] == 7


async def test_network_error_when_nothing_listens(tmp_path: Path) -> None:
    tk, _ = await setup_tavern(tmp_path, [profile("http://127.0.0.1:9/v1")])
    try:
        with pytest.raises(GenerateTaskError) as info:
            await context(tk).generate_task(USER)
    finally:
        await tk.close()
    assert info.value.code == "network"


async def test_unreadable_body_is_unknown(tmp_path: Path) -> None:
    import httpx2

    from ._helpers import mock_client

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, content=b"{not json", headers={"content-type": "application/json"}
        )

    tk, _ = await setup_tavern(tmp_path, [profile("http://mock/v1")])
    try:
        with pytest.raises(GenerateTaskError) as info:
            await context(tk, client=mock_client(handler)).generate_task(USER)
    finally:
        await tk.close()
    assert info.value.code == "unknown"


async def test_context_budget_when_mandatory_prompts_do_not_fit(tmp_path: Path) -> None:
    async with ScriptedServer() as server:
        tk, _ = await setup_tavern(
            tmp_path,
            [profile(server.base_url + "/v1")],
            preset=ChatCompletionPreset.create(openai_max_context=40, openai_max_tokens=30),
        )
        try:
            with pytest.raises(GenerateTaskError) as info:
                await context(tk).generate_task(USER)
        finally:
            await tk.close()
    assert info.value.code == "context_budget"
    assert server.requests == []


async def test_abort_stops_a_request_in_flight(tmp_path: Path) -> None:
    import asyncio

    async with ScriptedServer([Reply(text="late", delay=5)]) as server:
        tk, _ = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")])
        controller = AbortController()
        try:
            task = asyncio.ensure_future(context(tk).generate_task(USER, abort=controller.signal))
            await asyncio.sleep(0.2)
            controller.abort()
            with pytest.raises(GenerateTaskError) as info:
                await asyncio.wait_for(task, 2)
        finally:
            await tk.close()
    assert info.value.code == "aborted"


async def test_stream_interrupted_keeps_delivered_text(tmp_path: Path) -> None:
    reply = Reply(text="one two three four", break_after=2)
    preset = ChatCompletionPreset.create(stream_openai=True)
    async with ScriptedServer([reply]) as server:
        tk, _ = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")], preset=preset)
        try:
            with pytest.raises(GenerateTaskError) as info:
                await context(tk).generate_task(USER)
        finally:
            await tk.close()
    assert info.value.code == "network"
    assert info.value.details["delivered_text"] == "one two "


async def test_anthropic_profile(tmp_path: Path) -> None:
    async with ScriptedServer([Reply(text="Salut.", reasoning="hm")]) as server:
        tk, _ = await setup_tavern(
            tmp_path, [profile(server.base_url, source="claude", model="claude-sonnet-4-5")]
        )
        try:
            result = await context(tk).generate_task(USER)
        finally:
            await tk.close()
    assert server.requests[0].path == "/v1/messages"
    assert (result.assistant_text, result.reasoning) == ("Salut.", "hm")
    assert result.usage == {"prompt_tokens": 12, "completion_tokens": 5}
