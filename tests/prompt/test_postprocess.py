"""SillyTavern's server-side prompt post-processing (reference §2.5, ``prompt-converters.js``).

The expected values are worked out by hand from the behaviour described in the reference:
merge joins same-role runs with a blank line and moves names into the text; semi/strict turn
mid-prompt system messages into user messages (strict adds placeholders); single makes one user
turn; Claude and Gemini split off the leading system messages.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tavernkit.errors import FormatError
from tavernkit.prompt.postprocess import (
    PROMPT_PLACEHOLDER,
    PromptNames,
    merge_messages,
    post_process_prompt,
    prepare_for_provider,
)
from tavernkit.prompt.vendor_converters import convert_claude_messages, convert_google_prompt
from tavernkit.providers.anthropic import AnthropicAdapter
from tavernkit.providers.gemini import GeminiAdapter
from tavernkit.providers.request import ChatPrompt

NAMES = PromptNames(char_name="Seraphina", user_name="Ada", group_names=("Bob",))

PROMPT: list[dict[str, Any]] = [
    {"role": "system", "content": "Main prompt."},
    {"role": "system", "content": "Description."},
    {"role": "system", "content": "[Example Chat]"},
    {"role": "system", "name": "example_user", "content": "Hello?"},
    {"role": "system", "name": "example_assistant", "content": "Seraphina: Hi."},
    {"role": "system", "content": "[Start a new Chat]"},
    {"role": "assistant", "content": "Welcome to Eldoria."},
    {"role": "user", "content": "Where am I?"},
    {"role": "system", "content": "Author's note."},
    {"role": "user", "name": "Ada", "content": "Hello again."},
]


def test_no_processing_returns_a_copy() -> None:
    out = post_process_prompt(PROMPT, "", NAMES)
    assert out == PROMPT and out is not PROMPT and out[0] is not PROMPT[0]


def test_unknown_processing_is_a_format_error() -> None:
    with pytest.raises(FormatError, match="post-processing"):
        post_process_prompt(PROMPT, "squash", NAMES)


def test_merge_joins_runs_and_inlines_names() -> None:
    before = copy.deepcopy(PROMPT)
    out = post_process_prompt(PROMPT, "merge", NAMES)
    assert before == PROMPT  # the input is not touched
    assert out == [
        {
            "role": "system",
            "content": "Main prompt.\n\nDescription.\n\n[Example Chat]\n\nAda: Hello?\n\n"
            "Seraphina: Hi.\n\n[Start a new Chat]",
        },
        {"role": "assistant", "content": "Welcome to Eldoria."},
        {"role": "user", "content": "Where am I?"},
        {"role": "system", "content": "Author's note."},
        {"role": "user", "content": "Ada: Hello again."},
    ]
    assert post_process_prompt(PROMPT, "claude", NAMES) == out  # the legacy name


def test_semi_turns_mid_prompt_system_into_user() -> None:
    out = post_process_prompt(PROMPT, "semi", NAMES)
    assert [m["role"] for m in out] == ["system", "assistant", "user"]
    assert out[2]["content"] == "Where am I?\n\nAuthor's note.\n\nAda: Hello again."


def test_strict_adds_placeholder_user_after_system() -> None:
    out = post_process_prompt(PROMPT, "strict", NAMES)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert out[1] == {"role": "user", "content": PROMPT_PLACEHOLDER}
    # an assistant first: a placeholder user goes before it
    out = post_process_prompt([{"role": "assistant", "content": "Hi"}], "strict", NAMES)
    assert out == [
        {"role": "user", "content": PROMPT_PLACEHOLDER},
        {"role": "assistant", "content": "Hi"},
    ]
    # semi never adds placeholders
    assert post_process_prompt([{"role": "assistant", "content": "Hi"}], "semi", NAMES) == [
        {"role": "assistant", "content": "Hi"}
    ]


def test_single_makes_one_user_message_with_speaker_names() -> None:
    out = post_process_prompt(PROMPT, "single", NAMES)
    assert len(out) == 1 and out[0]["role"] == "user"
    content = out[0]["content"]
    assert content.startswith("Main prompt.\n\nDescription.")  # system text is not prefixed
    assert "\n\nSeraphina: Welcome to Eldoria.\n\nAda: Where am I?" in content
    assert content.endswith("\n\nAda: Hello again.")  # not prefixed twice


def test_empty_prompt_gets_a_placeholder_and_empty_messages_stay_apart() -> None:
    assert merge_messages([], NAMES) == [{"role": "user", "content": PROMPT_PLACEHOLDER}]
    out = merge_messages(
        [
            {"role": "user", "content": "a"},
            {"role": "user", "content": ""},
            {"role": "user", "content": "b"},
        ],
        NAMES,
    )
    # an empty message is never merged into the one before, but the next one merges into it
    assert out == [{"role": "user", "content": "a"}, {"role": "user", "content": "\n\nb"}]


TOOL_PROMPT: list[dict[str, Any]] = [
    {"role": "user", "content": "Roll a die."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "roll", "arguments": '{"n":6}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "4"},
    {"role": "tool", "tool_call_id": "c2", "content": "5"},
    {"role": "user", "content": "Thanks."},
]


def test_merge_without_tools_turns_results_into_user_text() -> None:
    out = post_process_prompt(TOOL_PROMPT, "merge", NAMES)
    assert out == [
        {"role": "user", "content": "Roll a die."},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "4\n\n5\n\nThanks."},
    ]


def test_merge_tools_keeps_calls_and_results_apart() -> None:
    out = post_process_prompt(TOOL_PROMPT, "merge_tools", NAMES)
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "tool", "user"]
    assert out[1]["tool_calls"][0]["id"] == "c1"
    assert out[2] == {"role": "tool", "tool_call_id": "c1", "content": "4"}
    strict = post_process_prompt(TOOL_PROMPT, "strict_tools", NAMES)
    assert [m["role"] for m in strict] == ["user", "assistant", "tool", "tool", "user"]


def test_images_survive_merging() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    out = post_process_prompt(
        [
            {"role": "user", "content": "Look:"},
            {"role": "user", "content": [{"type": "text", "text": "this\n"}, image]},
            {"role": "user", "content": "Nice?"},
        ],
        "merge",
        NAMES,
    )
    assert out == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look:\n\nthis\n"},
                image,
                {"type": "text", "text": "Nice?"},
            ],
        }
    ]


roles = st.sampled_from(["system", "user", "assistant", "tool"])
texts = st.text(alphabet="ab \n:", min_size=1, max_size=6)
messages_strategy = st.lists(
    st.fixed_dictionaries({"role": roles, "content": texts}), min_size=0, max_size=8
)


@given(messages_strategy)
def test_merge_leaves_no_same_role_neighbours(messages: list[dict[str, Any]]) -> None:
    out = merge_messages(messages, NAMES)
    assert all(a["role"] != b["role"] for a, b in itertools.pairwise(out))
    assert all(m["role"] != "tool" for m in out)


@given(messages_strategy)
def test_strict_shape(messages: list[dict[str, Any]]) -> None:
    out = post_process_prompt(messages, "strict", NAMES)
    assert out[0]["role"] in ("system", "user")
    if out[0]["role"] == "system":
        assert out[1]["role"] == "user"
    assert all(m["role"] in ("user", "assistant") for m in out[1:])
    assert all(a["role"] != b["role"] for a, b in itertools.pairwise(out))


# --- Claude ----------------------------------------------------------------------------------


def test_claude_with_system_prompt() -> None:
    out = convert_claude_messages(PROMPT, NAMES, prefill="Sure, ", use_system_prompt=True)
    assert out.system == [
        {"type": "text", "text": "Main prompt."},
        {"type": "text", "text": "Description."},
        {"type": "text", "text": "[Example Chat]"},
        {"type": "text", "text": "Ada: Hello?"},
        {"type": "text", "text": "Seraphina: Hi."},
        {"type": "text", "text": "[Start a new Chat]"},
    ]
    assert out.messages == [
        {"role": "assistant", "content": [{"type": "text", "text": "Welcome to Eldoria."}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Where am I?"},
                {"type": "text", "text": "Author's note."},
                {"type": "text", "text": "Ada: Hello again."},
            ],
        },
        # the prefill loses its trailing whitespace
        {"role": "assistant", "content": [{"type": "text", "text": "Sure,"}]},
    ]


def test_claude_without_system_prompt_sends_everything_as_turns() -> None:
    out = convert_claude_messages(PROMPT[:5], NAMES)
    assert out.system == []
    assert [m["role"] for m in out.messages] == ["user"]
    assert out.messages[0]["content"][3] == {"type": "text", "text": "Ada: Hello?"}


def test_claude_placeholder_tools_images_and_no_prefill() -> None:
    only_system = convert_claude_messages(
        [{"role": "system", "content": "x"}], NAMES, use_system_prompt=True
    )
    assert only_system.messages == [
        {"role": "user", "content": [{"type": "text", "text": PROMPT_PLACEHOLDER}]}
    ]
    tools = convert_claude_messages(TOOL_PROMPT, NAMES, use_tools=True)
    assert tools.messages[1] == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "c1", "name": "roll", "input": {"n": 6}}],
    }
    assert tools.messages[2]["content"][:2] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "4"},
        {"type": "tool_result", "tool_use_id": "c2", "content": "5"},
    ]
    as_text = convert_claude_messages(TOOL_PROMPT, NAMES)
    assert as_text.messages[1]["content"] == [{"type": "text", "text": '{"n":6}'}]
    assert as_text.messages[2]["content"][0] == {"type": "text", "text": "4"}

    image = {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,QUJD"}}
    moved = convert_claude_messages(
        [
            {"role": "user", "content": "draw"},
            {"role": "assistant", "content": [{"type": "text", "text": ""}, image]},
        ],
        NAMES,
        no_prefill=True,
    )
    assert moved.messages == [
        {"role": "user", "content": [{"type": "text", "text": "draw"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "\u200b"}]},
        {
            "role": "user",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": "QUJD"},
                }
            ],
        },
    ]
    prefilled = convert_claude_messages(PROMPT[-2:], NAMES, prefill="Hm", no_prefill=True)
    assert prefilled.messages[-1]["role"] == "user"


def test_claude_bad_tool_arguments_name_the_field() -> None:
    broken = copy.deepcopy(TOOL_PROMPT)
    broken[1]["tool_calls"][0]["function"]["arguments"] = "{oops"
    with pytest.raises(FormatError, match=r"messages\[1\]\.tool_calls"):
        convert_claude_messages(broken, NAMES)


def test_prepared_messages_give_the_same_anthropic_request() -> None:
    from tavernkit.prompt.convert import message_from_dict

    expected = convert_claude_messages(PROMPT, NAMES, prefill="Sure, ", use_system_prompt=True)
    prepared = prepare_for_provider(
        PROMPT, "claude", NAMES, use_system_prompt=True, prefill="Sure, "
    )
    body = (
        AnthropicAdapter()
        .build_request(
            ChatPrompt(tuple(message_from_dict(m) for m in prepared)), model="claude", stream=False
        )
        .body
    )
    assert body["system"] == expected.system
    assert body["messages"] == expected.messages


# --- Gemini ----------------------------------------------------------------------------------


def test_google_system_instruction_and_merging() -> None:
    out = convert_google_prompt(PROMPT, NAMES, use_system_prompt=True)
    assert out.system_instruction == {
        "parts": [
            {"text": "Main prompt."},
            {"text": "Description."},
            {"text": "[Example Chat]"},
            {"text": "Ada: Hello?"},
            {"text": "Seraphina: Hi."},
            {"text": "[Start a new Chat]"},
        ]
    }
    assert out.contents == [
        {"role": "model", "parts": [{"text": "Welcome to Eldoria."}]},
        {"role": "user", "parts": [{"text": "Where am I?\n\nAuthor's note.\n\nAda: Hello again."}]},
    ]
    # a lone system message stays in the contents
    lone = convert_google_prompt(
        [{"role": "system", "content": "x"}], NAMES, use_system_prompt=True
    )
    assert lone.system_instruction == {"parts": []}
    assert lone.contents == [{"role": "user", "parts": [{"text": "x"}]}]


def test_google_tool_calls_and_results() -> None:
    out = convert_google_prompt(TOOL_PROMPT, NAMES)
    assert out.contents == [
        {"role": "user", "parts": [{"text": "Roll a die."}]},
        {"role": "model", "parts": [{"functionCall": {"name": "roll", "args": {"n": 6}}}]},
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "roll",
                        "response": {"name": "roll", "content": "4"},
                    }
                },
                {
                    "functionResponse": {
                        "name": "unknown",
                        "response": {"name": "unknown", "content": "5"},
                    }
                },
                {"text": "Thanks."},
            ],
        },
    ]


def test_prepared_messages_keep_gemini_system_rule() -> None:
    from tavernkit.prompt.convert import message_from_dict

    prepared = prepare_for_provider(PROMPT, "makersuite", NAMES, use_system_prompt=True)
    assert [m["role"] for m in prepared[:6]] == ["system"] * 6
    assert prepared[8] == {"role": "user", "content": "Author's note."}
    assert prepared[9] == {"role": "user", "content": "Ada: Hello again."}
    body = (
        GeminiAdapter()
        .build_request(
            ChatPrompt(tuple(message_from_dict(m) for m in prepared)), model="gemini", stream=False
        )
        .body
    )
    assert [p["text"] for p in body["systemInstruction"]["parts"]] == [
        p["text"]
        for p in convert_google_prompt(PROMPT, NAMES, use_system_prompt=True).system_instruction[
            "parts"
        ]
    ]
    assert [c["role"] for c in body["contents"]] == ["model", "user"]
