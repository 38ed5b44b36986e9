"""to_provider_request: the built prompt crosses to the provider layer without losing names,
tool calls, reasoning signatures, images or block flags."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tavernkit.errors import FormatError
from tavernkit.prompt.assembled import AssembledChat, AssembledText, PromptBlock
from tavernkit.prompt.convert import (
    ChatShaping,
    RequestExtras,
    message_from_dict,
    to_provider_request,
)
from tavernkit.prompt.postprocess import PromptNames
from tavernkit.providers.anthropic import AnthropicAdapter
from tavernkit.providers.openai_chat import OpenAIChatAdapter
from tavernkit.providers.request import Sampling, ToolSpec, WireImagePart, WireTextPart

CALL = {"id": "c1", "type": "function", "function": {"name": "roll", "arguments": '{"n":6}'}}


def block(message: dict[str, Any], ident: str, source: Any = "preset", **kw: Any) -> PromptBlock:
    return PromptBlock(message=message, identifier=ident, source=source, tokens=1, **kw)


PROMPT = AssembledChat(
    blocks=(
        block({"role": "system", "content": "Main."}, "main"),
        block({"role": "system", "content": "Card."}, "charDescription"),
        block({"role": "user", "content": "Hi", "name": "Ada"}, "chatHistory-1", "history"),
        block(
            {
                "role": "assistant",
                "content": "Hello.",
                "reasoning": "They greeted me.",
                "signature": "sig-1",
            },
            "chatHistory-2",
            "history",
        ),
        block(
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            "toolCall-chatHistory-3",
            "tool",
            requires_tool_calling=True,
        ),
        block(
            {"role": "tool", "content": "4", "tool_call_id": "c1"},
            "c1",
            "tool",
            requires_tool_calling=True,
        ),
        block(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look"},
                    {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},
                ],
            },
            "chatHistory-4",
            "history",
        ),
    ),
    budget=100,
)


def test_everything_survives() -> None:
    req = to_provider_request(
        PROMPT, sampling=Sampling(temperature=0.5), extras=RequestExtras(tools=[ToolSpec("roll")])
    )
    m = req.messages
    assert [x.role for x in m] == [
        "system",
        "system",
        "user",
        "assistant",
        "assistant",
        "tool",
        "user",
    ]
    assert m[2].name == "Ada"
    assert m[3].reasoning_blocks[0].text == "They greeted me."
    assert m[3].reasoning_blocks[0].signature == "sig-1"
    assert m[4].tool_calls[0].id == "c1" and m[4].tool_calls[0].arguments == '{"n":6}'
    assert m[4].content == ""
    assert m[5].tool_call_id == "c1"
    assert m[6].content == (
        WireTextPart("Look"),
        WireImagePart(url="https://x/y.png", detail="low"),
    )
    assert req.sampling.temperature == 0.5 and req.tools[0].name == "roll"
    assert not any(x.cache for x in m)


def test_openai_body_carries_the_built_messages() -> None:
    plain = AssembledChat(tuple(b for b in PROMPT.blocks if b.source != "tool"))
    body = OpenAIChatAdapter().build_request(to_provider_request(plain), model="m", stream=False)
    expected = [
        {k: v for k, v in msg.items() if k not in ("reasoning", "signature")}
        for msg in plain.messages
    ]
    assert body.body["messages"] == expected


def test_model_without_tools_drops_tool_blocks_and_marks_cache() -> None:
    req = to_provider_request(PROMPT, shaping=ChatShaping(tool_calling=False, cache_prefix=True))
    assert [x.role for x in req.messages] == ["system", "system", "user", "assistant", "user"]
    assert [x.cache for x in req.messages] == [False, True, False, False, False]


def test_claude_post_processing_through_the_adapter() -> None:
    req = to_provider_request(
        PROMPT,
        shaping=ChatShaping(
            tool_calling=False,
            source="claude",
            names=PromptNames("Seraphina", "Ada"),
            use_system_prompt=True,
            prefill="Sure ",
        ),
    )
    body = AnthropicAdapter().build_request(req, model="claude", stream=False).body
    assert body["system"] == [{"type": "text", "text": "Main."}, {"type": "text", "text": "Card."}]
    assert body["messages"][0] == {"role": "user", "content": [{"type": "text", "text": "Ada: Hi"}]}
    assert body["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Sure"}],
    }


def test_merge_post_processing_for_openai_compatible_sources() -> None:
    req = to_provider_request(PROMPT, shaping=ChatShaping(tool_calling=False, processing="merge"))
    assert [x.role for x in req.messages] == ["system", "user", "assistant", "user"]
    assert req.messages[0].content == "Main.\n\nCard."


def test_every_message_carries_its_block_label() -> None:
    req = to_provider_request(PROMPT)
    labels = [m.label for m in req.messages]
    assert all(label is not None for label in labels)
    assert [(x.kind, x.identifier, x.tool_only) for x in labels if x is not None] == [
        (b.source, b.identifier, b.requires_tool_calling) for b in PROMPT.blocks
    ]


def test_merged_messages_merge_their_labels() -> None:
    injected = AssembledChat(
        blocks=(
            block({"role": "system", "content": "Main."}, "main"),
            block({"role": "user", "content": "Old"}, "chatHistory-1", "history"),
            block({"role": "user", "content": "[Note]"}, "authorsNote", "injection"),
            block({"role": "user", "content": "Hi"}, "chatHistory-2", "history", entries=("w.1",)),
            block({"role": "assistant", "content": "Yo"}, "chatHistory-3", "history"),
        )
    )
    req = to_provider_request(injected, shaping=ChatShaping(processing="merge"))
    assert [m.text() for m in req.messages] == ["Main.", "Old\n\n[Note]\n\nHi", "Yo"]
    merged = req.messages[1].label
    assert merged is not None
    # a chat message squashed with an injection is no longer history a window may drop
    assert merged.kind == "injection" and not merged.trimmable
    assert merged.identifier == "chatHistory-1+authorsNote+chatHistory-2"
    assert merged.entries == ("w.1",) and merged.tokens == 3
    last = req.messages[2].label
    assert last is not None and last.kind == "history" and last.trimmable
    # the bookkeeping key never reaches the wire
    body = OpenAIChatAdapter().build_request(req, model="m", stream=False).body
    assert "_blocks" not in str(body)


def test_text_prompt_keeps_prompt_and_stop() -> None:
    text = AssembledText(prompt="Once upon", stop=["\nUser:"])
    req = to_provider_request(text, sampling=Sampling(max_tokens=5))
    assert (req.prompt, req.stop, req.sampling.max_tokens) == ("Once upon", ("\nUser:",), 5)
    assert to_provider_request(text, stop=["END"]).stop == ("END",)


def test_bad_messages_raise_format_errors_naming_the_field() -> None:
    with pytest.raises(FormatError, match=r"messages\[0\]\.role"):
        message_from_dict({"role": "narrator", "content": "x"}, where="messages[0]")
    with pytest.raises(FormatError, match=r"content\[0\]\.type"):
        message_from_dict({"role": "user", "content": [{"type": "audio"}]})
    with pytest.raises(FormatError, match="url or data"):
        message_from_dict({"role": "user", "content": [{"type": "image_url", "image_url": {}}]})


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["system", "user", "assistant"]),
            st.text(max_size=20),
            st.one_of(st.none(), st.from_regex(r"[A-Za-z0-9_]{1,10}", fullmatch=True)),
        ),
        max_size=6,
    )
)
def test_plain_messages_round_trip_through_the_openai_adapter(
    items: list[tuple[str, str, str | None]],
) -> None:
    messages = [
        {"role": role, "content": content, **({"name": name} if name else {})}
        for role, content, name in items
    ]
    prompt = AssembledChat(tuple(block(m, f"b{i}") for i, m in enumerate(messages)))
    body = OpenAIChatAdapter().build_request(to_provider_request(prompt), model="m", stream=False)
    assert body.body["messages"] == messages
