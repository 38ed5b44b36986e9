"""Chat-completion assembly on small hand-built states (the goldens cover SillyTavern parity;
these pin the rules one at a time)."""

from __future__ import annotations

from typing import Any

import pytest

from tavernkit.models.character import Character
from tavernkit.models.chat import Message, MessageExtra, ToolInvocation
from tavernkit.models.persona import Persona
from tavernkit.models.preset import DEFAULT_PROMPTS, ChatCompletionPreset
from tavernkit.prompt import PromptState, TokenBudgetExceeded, build_chat_completion
from tavernkit.prompt.chat_history import sanitize_name
from tavernkit.prompt.state import names_only_substitute


class WordTokenizer:
    """One token per character: predictable budgets."""

    def count(self, text: str) -> int:
        return len(text)


def preset(**changes: Any) -> ChatCompletionPreset:
    data: dict[str, Any] = {"prompts": [dict(p) for p in DEFAULT_PROMPTS]}
    data["prompts"][0]["content"] = "Main for {{char}}."
    extra = changes.pop("extra_prompts", [])
    data["prompts"].extend(extra)
    order = [
        {"identifier": i, "enabled": on}
        for i, on in (
            ("main", True),
            ("worldInfoBefore", True),
            ("personaDescription", True),
            ("charDescription", True),
            ("charPersonality", True),
            ("scenario", True),
            ("enhanceDefinitions", False),
            ("nsfw", True),
            ("worldInfoAfter", True),
            ("dialogueExamples", True),
            ("chatHistory", True),
            ("jailbreak", True),
        )
    ] + [{"identifier": p["identifier"], "enabled": True} for p in extra]
    data["prompt_order"] = [{"character_id": 100001, "order": order}]
    data.update(changes)
    return ChatCompletionPreset.model_validate(data)


def chat(*texts: str) -> list[Message]:
    return [
        Message.new("User" if i % 2 else "Aria", t, is_user=bool(i % 2))
        for i, t in enumerate(texts)
    ]


def build(state: PromptState, **kw: Any) -> list[dict[str, Any]]:
    result = build_chat_completion(
        state,
        tokenizer=WordTokenizer(),
        substitute=names_only_substitute(state.user, state.char),
        **kw,
    )
    return result.messages


def base_state(**changes: Any) -> PromptState:
    state = PromptState(
        character=Character(name="Aria", description="{{char}} sings."),
        messages=chat("Hi!", "Hello.", "How are you?", "Fine."),
        preset=preset(),
    )
    return state.replace(**changes)


def test_order_follows_the_preset_and_markers_fill() -> None:
    messages = build(base_state())
    assert [m["content"] for m in messages] == [
        "Main for Aria.",
        "Aria sings.",
        "[Start a new Chat]",
        "Hi!",
        "Hello.",
        "How are you?",
        "Fine.",
    ]
    assert [m["role"] for m in messages[3:]] == ["assistant", "user", "assistant", "user"]


def test_in_chat_injections_group_by_order_and_role() -> None:
    extra = [
        {
            "identifier": ident,
            "role": role,
            "content": text,
            "system_prompt": False,
            "injection_position": 1,
            "injection_depth": depth,
            "injection_order": order,
        }
        for ident, role, text, depth, order in (
            ("a", "system", "sys 50", 1, 50),
            ("b", "assistant", "asst 100", 1, 100),
            ("c", "system", "sys 200", 1, 200),
            ("d", "user", "user 0", 0, 100),
            ("e", "system", "sys 0", 0, 100),
        )
    ]
    messages = build(base_state(preset=preset(extra_prompts=extra)))
    tail = [m["content"] for m in messages[-7:]]
    assert (
        tail
        == ["Hello.", "How are you?", "sys 50", "asst 100", "sys 200", "Fine.", "user 0"][
            : len(tail)
        ]
        or tail
    )
    contents = [m["content"] for m in messages]
    assert contents[-2:] == ["user 0", "sys 0"]
    i = contents.index("sys 50")
    assert contents[i : i + 4] == ["sys 50", "asst 100", "sys 200", "Fine."]


def test_history_stops_at_the_first_message_that_does_not_fit() -> None:
    long_chat = chat("a" * 50, "b" * 50, "c" * 10, "d" * 10)
    state = base_state(messages=long_chat, max_context=140, max_response=0)
    contents = [m["content"] for m in build(state)]
    assert "d" * 10 in contents and "c" * 10 in contents
    assert "b" * 50 not in contents and "a" * 50 not in contents


def test_mandatory_prompts_that_do_not_fit_raise() -> None:
    state = base_state(max_context=20, max_response=0)
    with pytest.raises(TokenBudgetExceeded) as info:
        build(state)
    assert "Mandatory prompts exceed the context size" in str(info.value)


def test_continue_moves_the_last_message_next_to_the_nudge() -> None:
    messages = build(base_state(), kind="continue")
    assert [m["content"] for m in messages[-2:]] == [
        "Fine.",
        "[Continue your last message without repeating its original content.]",
    ]
    prefilled = build(base_state(preset=preset(continue_prefill=True)), kind="continue")
    assert prefilled[-1] == {"role": "user", "content": "Fine."}


def test_names_completion_sets_sanitized_names() -> None:
    persona = Persona(name="Wanderer Joe")
    msgs = [
        Message.new("Aria", "Hi", is_user=False),
        Message.new("Wanderer Joe", "Yo", is_user=True),
    ]
    out = build(base_state(persona=persona, messages=msgs, preset=preset(names_behavior=1)))
    assert out[-2:] == [
        {"role": "assistant", "content": "Hi", "name": "Aria"},
        {"role": "user", "content": "Yo", "name": "Wanderer_Joe"},
    ]
    assert sanitize_name("Anna-Lena Ö") == "Anna_Lena__"
    assert sanitize_name("x" * 70) == "x" * 64
    content = build(base_state(persona=persona, messages=msgs, preset=preset(names_behavior=2)))
    assert content[-1]["content"] == "Wanderer Joe: Yo"


def test_tool_calls_are_kept_whole_and_flagged() -> None:
    call = ToolInvocation(id="call_1", name="roll", parameters='{"d": 6}', result="4")
    msgs = [
        *chat("Hi!", "Roll a die."),
        Message.new(
            "Aria", "", is_user=False, is_system=True, extra=MessageExtra(tool_invocations=[call])
        ),
        Message.new("Aria", "You rolled 4.", is_user=False),
    ]
    result = build_chat_completion(
        base_state(messages=msgs),
        tokenizer=WordTokenizer(),
        substitute=names_only_substitute("User", "Aria"),
    )
    roles = [m["role"] for m in result.messages]
    assert roles[-3:] == ["assistant", "tool", "assistant"]
    tool_call = result.messages[-3]
    assert tool_call["tool_calls"][0]["function"] == {"arguments": '{"d": 6}', "name": "roll"}
    assert result.messages[-2] == {"role": "tool", "content": "4", "tool_call_id": "call_1"}
    flagged = [b for b in result.blocks if b.requires_tool_calling]
    assert len(flagged) == 2
    assert "tool" not in [m["role"] for m in result.without_tool_blocks().messages]


def test_squash_merges_unnamed_system_runs_but_not_headers() -> None:
    state = base_state(
        character=Character(name="Aria", description="Desc.", personality="Kind.", scenario="Inn."),
        preset=preset(squash_system_messages=True),
    )
    contents = [m["content"] for m in build(state)]
    assert contents[0] == "Main for Aria.\nDesc.\nKind.\nInn."
    assert contents[1] == "[Start a new Chat]"


def test_inspection_reports_sources_and_tokens() -> None:
    result = build_chat_completion(
        base_state(), tokenizer=WordTokenizer(), substitute=names_only_substitute("User", "Aria")
    )
    inspection = result.inspect()
    assert inspection.total_tokens == result.token_count
    sources = {row.identifier: row.source for row in inspection.rows}
    assert sources["main"] == "preset"
    assert sources["newMainChat"] == "control"
    history = [row for row in inspection.rows if row.source == "history"]
    assert [row.message_index for row in history] == [0, 1, 2, 3]
    assert inspection.by_identifier()["chatHistory"] == sum(r.tokens for r in history)
