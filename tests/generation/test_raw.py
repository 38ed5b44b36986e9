"""generate_raw / generate_raw_data / generate_quiet_prompt, and the response helpers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tavernkit import GenerateTaskError
from tavernkit.context.response_message import (
    extract_all_function_calls,
    extract_message_from_data,
    get_response_message_content,
)
from tavernkit.models.chat import Message
from tavernkit.models.settings import Settings
from tavernkit.models.templates import ReasoningTemplate

from ._helpers import context, profile, setup_tavern
from ._scripted_server import Reply, ScriptedServer


async def _raw(
    tmp_path: Path,
    replies: list[Reply],
    call: str,
    *args: Any,
    chat: bool = False,
    auto_parse: bool = True,
    **kw: Any,
) -> tuple[Any, ScriptedServer]:
    def parse(settings: Settings) -> None:
        settings.reasoning.auto_parse = auto_parse

    async with ScriptedServer(replies) as server:
        history = [Message.new("Ada", "The lamp went out.", is_user=True)] if chat else None
        tk, chat_id = await setup_tavern(
            tmp_path, [profile(server.base_url + "/v1")], chat=history, settings_edit=parse
        )
        await tk.store.put(
            "reasoning",
            ReasoningTemplate(name="Think XML", prefix="<think>", suffix="</think>", separator=""),
            name="Think XML",
        )
        try:
            result = await getattr(context(tk, chat_id), call)(*args, **kw)
        finally:
            await tk.close()
    return result, server


async def test_generate_raw_sends_a_literal_prompt_and_post_processes(tmp_path: Path) -> None:
    text, server = await _raw(
        tmp_path,
        [Reply(text="<think>hmm</think>Mira: A calm sea.  ")],
        "generate_raw",
        "Title this chat.",
        system_prompt="You name things.",
        prefill="Title:",
        response_length=20,
    )
    assert text == "A calm sea."
    body = server.requests[0].body
    assert body["messages"] == [
        {"role": "system", "content": "You name things."},
        {"role": "user", "content": "Title this chat."},
        {"role": "assistant", "content": "Title:"},
    ]
    assert body["max_tokens"] == 20
    assert "lighthouse" not in json.dumps(body)  # no card


async def test_generate_raw_keeps_the_reasoning_without_auto_parse(tmp_path: Path) -> None:
    # SillyTavern's removeReasoningFromString removes nothing with "Parse reasoning" off
    text, _ = await _raw(
        tmp_path,
        [Reply(text="<think>hmm</think>A calm sea.")],
        "generate_raw",
        "p",
        auto_parse=False,
    )
    assert text == "<think>hmm</think>A calm sea."


async def test_generate_raw_json_and_data(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"t": {"type": "string"}}, "required": ["t"]}
    text, _ = await _raw(
        tmp_path / "a", [Reply(text='{"t": "x"}')], "generate_raw", "p", json_schema=schema
    )
    assert json.loads(text) == {"t": "x"}
    data, _ = await _raw(
        tmp_path / "b", [Reply(text="hi", reasoning="r")], "generate_raw_data", "p"
    )
    assert data["choices"][0]["message"]["content"] == "hi"
    assert data["choices"][0]["message"]["reasoning_content"] == "r"
    assert extract_message_from_data(data) == "hi"


@pytest.mark.parametrize(
    ("call", "kw", "code"),
    [
        ("generate_raw", {"quiet_to_loud": True}, "unsupported_api"),
        ("generate_raw", {"api": "kobold"}, "unsupported_api"),
        ("generate_quiet_prompt", {"quiet_to_loud": True}, "unsupported_api"),
        ("generate_quiet_prompt", {"force_ch_id": 1}, "invalid_input"),
        ("generate_raw", {}, "no_response"),
    ],
)
async def test_raw_errors(tmp_path: Path, call: str, kw: dict[str, Any], code: str) -> None:
    with pytest.raises(GenerateTaskError) as info:
        await _raw(tmp_path, [Reply(text="")], call, "p", **kw)
    assert info.value.code == code


async def test_quiet_prompt_reuses_the_chat(tmp_path: Path) -> None:
    text, server = await _raw(
        tmp_path,
        [Reply(text="She relights it. Then she")],
        "generate_quiet_prompt",
        "Summarize the chat.",
        chat=True,
        trim_to_sentence=True,
        quiet_image="data:image/png;base64,AAAA",
    )
    assert text == "She relights it."
    messages = server.requests[0].body["messages"]
    dumped = json.dumps(messages)
    assert "The lamp went out." in dumped and "lighthouse keeper" in dumped
    last = messages[-1]
    assert last["content"][0]["text"] == "Summarize the chat."
    assert last["content"][1]["image_url"]["url"] == "data:image/png;base64,AAAA"


def test_extract_message_from_every_shape() -> None:
    shapes: list[tuple[Any, str]] = [
        ("plain", "plain"),
        ({"choices": [{"message": {"content": "oa"}}]}, "oa"),
        (
            {
                "choices": [
                    {
                        "message": {
                            "content": [
                                {"type": "text", "text": "pa"},
                                {"type": "text", "text": "rts"},
                            ]
                        }
                    }
                ]
            },
            "parts",
        ),
        ({"choices": [{"text": "completion"}]}, "completion"),
        (
            {
                "content": [
                    {"type": "thinking", "thinking": "x"},
                    {"type": "text", "text": "claude"},
                ]
            },
            "claude",
        ),
        (
            {
                "candidates": [
                    {"content": {"parts": [{"text": "t", "thought": True}, {"text": "gemini"}]}}
                ]
            },
            "gemini",
        ),
        ({"message": {"content": [{"type": "text", "text": "cohere"}]}}, "cohere"),
        ({"text": "cohere-v1"}, "cohere-v1"),
        ({"results": [{"text": "kobold"}]}, "kobold"),
        ({"output": "novel"}, "novel"),
        (
            {
                "sse_text": 'data: {"choices":[{"delta":{"content":"s"}}]}\n\n'
                'data: {"choices":[{"delta":{"content":"se"}}]}\n\ndata: [DONE]'
            },
            "sse",
        ),
        ({}, ""),
        (None, ""),
    ]
    for data, expected in shapes:
        assert extract_message_from_data(data) == expected, data


def test_migration_helpers() -> None:
    response = {
        "choices": [
            {
                "message": {
                    "content": "  hi ",
                    "tool_calls": [
                        {"id": "a", "function": {"name": "keep", "arguments": '{"x": 1}'}},
                        {"id": "b", "function": {"name": "drop", "arguments": "{}"}},
                    ],
                }
            }
        ]
    }
    calls = extract_all_function_calls(response, {"keep"})
    assert [(c.name, c.args, c.id) for c in calls] == [("keep", {"x": 1}, "a")]
    assert get_response_message_content(response) == "hi"
    with pytest.raises(GenerateTaskError) as none:
        extract_all_function_calls({"choices": [{"message": {"content": ""}}]}, None)
    assert none.value.code == "tool_call_missing"
    with pytest.raises(GenerateTaskError) as unmatched:
        extract_all_function_calls(response, {"other"})
    assert unmatched.value.code == "tool_call_missing"
    bad = {
        "choices": [
            {"message": {"tool_calls": [{"function": {"name": "keep", "arguments": "{x"}}]}}
        ]
    }
    with pytest.raises(GenerateTaskError) as parse:
        extract_all_function_calls(bad, {"keep"})
    assert parse.value.code == "tool_call_parse" and parse.value.details["raw_arguments"] == "{x"
    with pytest.raises(GenerateTaskError) as empty:
        get_response_message_content({"choices": [{"message": {"content": " "}}]})
    assert empty.value.code == "no_response"
