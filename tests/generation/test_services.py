"""The primitives beneath generate_task and the three service classes, end to end against the
scripted OpenAI-compatible server (chat and text completion) on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import pytest

from tavernkit import AbortController, GenerateTaskError
from tavernkit.context.request_primitives import StreamChunk
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.templates import InstructTemplate

from ._helpers import context, profile, setup_tavern
from ._scripted_server import Reply, ScriptedServer

MESSAGES = [
    {"role": "system", "content": "Translate for {{user}}."},
    {"role": "user", "content": "hello"},
]
CHATML = InstructTemplate(
    name="ChatML",
    input_sequence="<|im_start|>user",
    output_sequence="<|im_start|>assistant",
    system_sequence="<|im_start|>system",
    input_suffix="<|im_end|>\n",
    output_suffix="<|im_end|>\n",
    system_suffix="<|im_end|>\n",
    stop_sequence="<|im_end|>",
)


async def test_send_chat_request_sends_messages_as_given(tmp_path: Path) -> None:
    async with (
        ScriptedServer([Reply(text="Bonjour.", reasoning="easy")]) as one,
        ScriptedServer([Reply(text="Salut.")]) as two,
    ):
        tk, _ = await setup_tavern(
            tmp_path,
            [
                profile(one.base_url + "/v1", name="one"),
                profile(two.base_url + "/v1", name="two"),
            ],
        )
        await tk.store.put(
            "chat_preset",
            ChatCompletionPreset.create(temperature=0.3, openai_max_tokens=64),
            name="cool",
        )
        ctx = context(tk)
        try:
            body = await ctx.send_chat_request("quiet", MESSAGES, llm_preset_name="cool")
            # an explicit override beats the named profile
            other = await ctx.send_chat_request(
                "quiet",
                MESSAGES,
                api_preset_name="one",
                api_settings_override={"custom_url": two.base_url + "/v1", "model": "m2"},
            )
            with pytest.raises(GenerateTaskError) as info:
                await ctx.send_chat_request("quiet", MESSAGES, request_scope="everywhere")
        finally:
            await tk.close()
    message = body["choices"][0]["message"]
    assert (message["content"], message["reasoning_content"]) == ("Bonjour.", "easy")
    assert body["usage"]["completion_tokens"] == 5
    sent = one.requests[0].body
    # no envelope, no macros: exactly the caller's messages
    assert sent["messages"] == MESSAGES
    assert sent["temperature"] == 0.3 and sent["max_tokens"] == 64
    assert other["choices"][0]["message"]["content"] == "Salut."
    assert two.requests[0].body["model"] == "m2" and len(one.requests) == 1
    assert info.value.code == "invalid_input"


async def test_send_streaming_request_yields_chunks(tmp_path: Path) -> None:
    async with ScriptedServer([Reply(text="one two three")]) as server:
        tk, _ = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")])
        ctx = context(tk)
        try:
            chunks = [c async for c in ctx.send_streaming_request("quiet", MESSAGES)]
            aborted = AbortController()
            aborted.abort()
            with pytest.raises(GenerateTaskError) as info:
                async for _ in ctx.send_streaming_request("quiet", MESSAGES, aborted.signal):
                    pass
        finally:
            await tk.close()
    assert server.requests[0].body["stream"] is True
    assert [c.delta for c in chunks if not c.done] == ["one ", "two ", "three"]
    assert chunks[-2].text == "one two three"
    last = chunks[-1]
    assert isinstance(last, StreamChunk) and last.done
    assert last.response is not None
    assert last.response["choices"][0]["message"]["content"] == "one two three"
    assert info.value.code == "aborted" and len(server.requests) == 1


async def test_send_generation_request_routes_by_family(tmp_path: Path) -> None:
    async with ScriptedServer([Reply(text="Done.")]) as server:
        base = server.base_url + "/v1"
        tk, _ = await setup_tavern(
            tmp_path,
            [
                profile(base, name="chat"),
                profile(base, name="text", api="text", source="openai", tools=None),
            ],
        )
        ctx = context(tk)
        try:
            chat = await ctx.send_generation_request("quiet", {"prompt": "hi"})
            text = await ctx.send_generation_request(
                "quiet", {"prompt": "Story.\nMira:", "max_tokens": 12}, api_preset_name="text"
            )
        finally:
            await tk.close()
    assert chat["choices"][0]["message"]["content"] == "Done."
    assert text["choices"][0]["message"]["content"] == "Done."
    first, second = server.requests
    assert first.path == "/v1/chat/completions"
    assert first.body["messages"] == [{"role": "user", "content": "hi"}]
    assert second.path == "/v1/completions"
    assert second.body["prompt"] == "Story.\nMira:" and second.body["max_tokens"] == 12


async def test_chat_completion_service(tmp_path: Path) -> None:
    async with ScriptedServer([Reply(text="Bonjour.", reasoning="r")]) as server:
        tk, _ = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")])
        await tk.store.put("chat_preset", ChatCompletionPreset.create(temperature=0.2), name="cool")
        service = context(tk).chat_completion_service
        try:
            data = service.create_request_data({"messages": MESSAGES, "temperature": 0.9})
            extracted = await service.send_request(data)
            raw = await service.send_request(data, extract_data=False)
            processed = await service.process_request(
                {"messages": MESSAGES}, {"preset_name": "cool"}
            )
            stream = await service.send_request({**data, "stream": True})
            chunks = [c async for c in stream]
            with pytest.raises(GenerateTaskError):
                service.create_request_data({"messages": "nope"})
        finally:
            await tk.close()
    assert extracted == {"content": "Bonjour.", "reasoning": "r"}
    assert raw["object"] == "chat.completion"
    assert processed["content"] == "Bonjour."
    assert chunks[-1].done and chunks[-1].text == "Bonjour."
    temperatures = [r.body["temperature"] for r in server.requests]
    # the data's own value beats the preset's; process_request applies the named preset
    assert temperatures[:3] == [0.9, 0.9, 0.2]


async def test_text_completion_service(tmp_path: Path) -> None:
    async with ScriptedServer([Reply(text="Bonjour.")]) as server:
        base = server.base_url + "/v1"
        tk, _ = await setup_tavern(
            tmp_path,
            [profile(base, name="text", api="text", source="openai", tools=None)],
            active="text",
        )
        await tk.store.put("instruct", CHATML, name="ChatML")
        service = context(tk).text_completion_service
        try:
            prompt = await service.construct_prompt(MESSAGES, "ChatML")
            plain = await service.construct_prompt(MESSAGES, "ChatML", {"enabled": False})
            answer = await service.send_request(service.create_request_data({"prompt": prompt}))
            processed = await service.process_request({"prompt": "Q: hi\nA:"})
            with pytest.raises(GenerateTaskError) as info:
                await context(tk).chat_completion_service.send_request({"messages": MESSAGES})
        finally:
            await tk.close()
    assert "<|im_start|>user\nhello<|im_end|>" in prompt
    assert "Translate for {{user}}." in prompt  # messages go as given, macros included
    assert prompt.endswith("<|im_start|>assistant\n")
    assert plain.endswith("Ada: hello\nMira:")
    assert answer == {"content": "Bonjour.", "reasoning": None}
    assert processed["content"] == "Bonjour."
    assert server.requests[0].body["prompt"] == prompt
    assert info.value.code == "unsupported_api"


async def test_connection_manager_request_service(tmp_path: Path) -> None:
    async with ScriptedServer([Reply(text="Bonjour.")]) as server:
        base = server.base_url + "/v1"
        tk, _ = await setup_tavern(
            tmp_path,
            [
                profile("http://127.0.0.1:9/v1", name="active"),
                profile(base, name="translator", model="m-t"),
                profile(base, name="texty", api="text", source="openai", tools=None),
            ],
            active="active",
        )
        manager = context(tk).connection_manager
        try:
            assert manager.get_allowed_types() == {
                "openai": "Chat Completion",
                "textgenerationwebui": "Text Completion",
            }
            names = [p.name for p in await manager.get_supported_profiles()]
            assert names == ["active", "texty", "translator"]
            assert (await manager.get_profile("translator")).model == "m-t"  # type: ignore[union-attr]
            assert await manager.get_profile("missing") is None
            assert await manager.get_profile_icon("texty") == "fa-solid fa-align-left"
            assert await manager.get_profile_icon() == "fa-solid fa-comments"
            assert await manager.construct_prompt("hi", "translator") == [
                {"role": "user", "content": "hi"}
            ]
            result = await manager.send_request(
                "translator",
                MESSAGES,
                32,
                {"include_preset": False},
                {"temperature": 0.4},
            )
            text = await manager.send_request("texty", "Q: hi\nA:", 16)
            with pytest.raises(GenerateTaskError) as info:
                await manager.send_request("missing", "hi", 8)
        finally:
            await tk.close()
    assert result == {"content": "Bonjour.", "reasoning": None}
    sent = server.requests[0].body
    assert sent["model"] == "m-t" and sent["max_tokens"] == 32 and sent["temperature"] == 0.4
    assert "top_p" not in sent  # include_preset=False: only the caller's samplers
    assert text["content"] == "Bonjour."
    assert server.requests[1].body["prompt"] == "Q: hi\nA:"
    assert info.value.code == "invalid_input"
