"""Request bodies per wire API: images, tools, caching, signatures, prefill; and the
accumulator's tool-call rules."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tavernkit.errors import BadRequest
from tavernkit.providers.accumulator import Accumulator, ReasoningBlock, WireToolCall
from tavernkit.providers.anthropic import AnthropicAdapter
from tavernkit.providers.events import Finish, ReasoningDelta, ToolCallDelta
from tavernkit.providers.gemini import GeminiAdapter
from tavernkit.providers.llamacpp import LlamaCppAdapter
from tavernkit.providers.openai_chat import OpenAIChatAdapter
from tavernkit.providers.openai_responses import OpenAIResponsesAdapter
from tavernkit.providers.profiles import FAMILY_DEFAULTS, resolve_model
from tavernkit.providers.request import (
    ChatMessage,
    ChatPrompt,
    ResponseFormat,
    Sampling,
    TextPrompt,
    ToolSpec,
    WireImagePart,
    WireTextPart,
)

IMAGE = WireImagePart(data="aGVsbG8=", mime_type="image/png")
CALL = WireToolCall(
    index=0, id="call_1", name="roll", arguments='{"dice": "1d6"}', signature="sig-fc"
)
THINK = ReasoningBlock(text="hmm", signature="sig-think")


def chat() -> ChatPrompt:
    return ChatPrompt(
        (
            ChatMessage("system", "You are Wren.", cache=True),
            ChatMessage("user", (WireTextPart("look"), IMAGE)),
            ChatMessage("assistant", "", tool_calls=(CALL,), reasoning_blocks=(THINK,)),
            ChatMessage("tool", '{"result": 4}', tool_call_id="call_1"),
        ),
        sampling=Sampling(max_tokens=50, temperature=0.7),
        tools=(ToolSpec("roll", "Roll dice", {"type": "object", "properties": {}}),),
        tool_choice="auto",
    )


def test_openai_chat_images_tools_and_downgrade() -> None:
    body = OpenAIChatAdapter().build_request(chat(), model="gpt-4o", stream=True).body
    assert body["messages"][1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,aGVsbG8="},
    }
    assert body["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"dice": "1d6"}'
    assert body["messages"][3] == {
        "role": "tool",
        "content": '{"result": 4}',
        "tool_call_id": "call_1",
    }
    assert body["tools"][0]["function"]["name"] == "roll" and body["tool_choice"] == "auto"
    text_only = replace(FAMILY_DEFAULTS["openai"], supports_vision=False)
    wire = OpenAIChatAdapter().build_request(chat(), model="m", stream=False, profile=text_only)
    assert wire.downgrades == ("image replaced by a text placeholder",)
    assert "image" in wire.body["messages"][1]["content"][1]["text"]


def test_anthropic_system_cache_signatures_and_tools() -> None:
    wire = AnthropicAdapter().build_request(chat(), model="claude-sonnet-4-5", stream=True)
    body = wire.body
    assert body["system"] == [
        {"type": "text", "text": "You are Wren.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["messages"][0]["content"][1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": "aGVsbG8=",
    }
    assistant = body["messages"][1]["content"]
    assert assistant[0] == {"type": "thinking", "thinking": "hmm", "signature": "sig-think"}
    assert assistant[1] == {
        "type": "tool_use",
        "id": "call_1",
        "name": "roll",
        "input": {"dice": "1d6"},
    }
    assert body["messages"][2]["content"][0]["type"] == "tool_result"
    assert body["stream"] is True and body["max_tokens"] == 50


def test_anthropic_refuses_prefill_for_models_that_reject_it() -> None:
    prompt = ChatPrompt((ChatMessage("user", "hi"), ChatMessage("assistant", "Once")))
    profile = resolve_model("anthropic", "claude-opus-4-6")
    with pytest.raises(BadRequest, match="prefill"):
        AnthropicAdapter().build_request(
            prompt, model="claude-opus-4-6", stream=False, profile=profile
        )
    ok = AnthropicAdapter().build_request(
        prompt,
        model="claude-sonnet-4-5",
        stream=False,
        profile=resolve_model("anthropic", "claude-sonnet-4-5"),
    )
    assert ok.body["messages"][-1]["role"] == "assistant"


def test_gemini_echoes_thought_signatures_and_function_responses() -> None:
    wire = GeminiAdapter().build_request(chat(), model="gemini-3-pro-preview", stream=True)
    body = wire.body
    assert wire.path == "/models/gemini-3-pro-preview:streamGenerateContent"
    assert body["systemInstruction"] == {"parts": [{"text": "You are Wren."}]}
    model_parts = body["contents"][1]["parts"]
    assert {"text": "hmm", "thought": True, "thoughtSignature": "sig-think"} in model_parts
    call = next(p for p in model_parts if "functionCall" in p)
    assert call == {
        "functionCall": {"name": "roll", "args": {"dice": "1d6"}},
        "thoughtSignature": "sig-fc",
    }
    assert body["contents"][2]["parts"][0] == {
        "functionResponse": {"name": "roll", "response": {"result": 4}}
    }
    assert body["generationConfig"] == {"temperature": 0.7, "maxOutputTokens": 50}


def test_responses_and_llamacpp_bodies() -> None:
    body = OpenAIResponsesAdapter().build_request(chat(), model="gpt-5", stream=False).body
    kinds = [item.get("type", item.get("role")) for item in body["input"]]
    assert kinds == ["system", "user", "function_call", "function_call_output"]
    schema = {"type": "object", "properties": {"mood": {"type": "string"}}}
    text = TextPrompt("Q:", stop=("\nQ:",), response_format=ResponseFormat(schema))
    llama = LlamaCppAdapter().build_request(text, model=None, stream=True).body
    assert llama["json_schema"] == schema and llama["stop"] == ["\nQ:"] and llama["stream"] is True


def test_accumulator_tool_call_rules() -> None:
    acc = Accumulator()
    acc.feed_all(
        [
            ToolCallDelta(1, id="a", name="read_file"),
            ToolCallDelta(1, id="", name="", arguments_fragment='{"pa'),
            ToolCallDelta(1, name="read_file", arguments_fragment='th": "a.txt"}'),
            ToolCallDelta(3, name="noargs"),
            Finish("stop", "stop"),
        ]
    )
    assert acc.partial_arguments(1) == {"path": "a.txt"}
    result = acc.result()
    assert [(c.index, c.id, c.name, c.arguments) for c in result.tool_calls] == [
        (1, "a", "read_file", '{"path": "a.txt"}'),
        (3, "call_3", "noargs", "{}"),
    ]
    assert result.finish_reason == "tool_calls"


def test_accumulator_partial_arguments_and_truncation() -> None:
    acc = Accumulator()
    acc.feed(ToolCallDelta(0, id="x", name="f", arguments_fragment='{"city": "Edinb'))
    assert acc.partial_arguments(0) == {"city": "Edinb"}
    acc.feed(Finish("length", "max_tokens"))
    assert acc.result().tool_calls[0].truncated


def test_accumulator_reasoning_blocks() -> None:
    acc = Accumulator()
    acc.feed_all(
        [
            ReasoningDelta("a", block=0),
            ReasoningDelta("b", block=0),
            ReasoningDelta(signature="s1", block=0),
            ReasoningDelta(redacted=True, data="opaque", block=1),
            ReasoningDelta("c", block=2),
        ]
    )
    result = acc.result()
    assert result.reasoning == "ab\n\nc"
    assert [(b.text, b.signature, b.redacted, b.data) for b in result.reasoning_blocks] == [
        ("ab", "s1", False, None),
        ("", None, True, "opaque"),
        ("c", None, False, None),
    ]
