"""A group member's prompt on hand-built states: join-mode cards and depth prompts, the
nudge, the group macros, text-completion stop strings (the goldens cover parity; these pin
the rules one at a time, including the ones no golden reaches)."""

from __future__ import annotations

from typing import Any

from tavernkit.models.character import Character
from tavernkit.models.chat import ChatMetadata, Message
from tavernkit.models.group_context import GroupPromptContext, PromptMember
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.settings import PromptSettings, ReasoningSettings
from tavernkit.models.templates import ContextTemplate
from tavernkit.prompt import PromptState, build_chat_completion, build_text_completion
from tavernkit.prompt.card import card_fields
from tavernkit.prompt.extensions import build_extension_prompts
from tavernkit.prompt.macros import macro_substitute


def _member(name: str, **fields: Any) -> PromptMember:
    muted = fields.pop("muted", False)
    return PromptMember(Character.model_validate({"name": name, **fields}), muted)


ALICE = _member(
    "Alice",
    description="{{char}} is a knight.",
    mes_example="{{user}}: Hi\n{{char}}: Hey.",
    extensions={"depth_prompt": {"prompt": "{{char}} stays calm.", "depth": 2, "role": "user"}},
)
BOB = _member("Bob", description="  ", scenario="Market day.")
CARA = _member(
    "Cara",
    description="{{char}} sees {{notChar}}.",
    muted=True,
    extensions={"depth_prompt": {"prompt": "Cara hums.", "depth": 1}},
)


def _state(speaker: int, **context: Any) -> PromptState:
    members = (ALICE, BOB, CARA)
    group = GroupPromptContext(members=members, speaker=speaker, **context)
    messages = [
        Message.new("Bob", "Hello.", is_user=False),
        Message.new("Ada", "Hi.", is_user=True),
    ]
    return PromptState(
        character=members[speaker].character,
        messages=messages,
        user_name="Ada",
        preset=ChatCompletionPreset(),
        group=group,
    )


def test_join_skips_empty_fields_whole_and_evaluates_each_member_as_itself() -> None:
    state = _state(0, join=True, join_prefix="<{{char}} <FIELDNAME>>", join_suffix="|")
    fields = card_fields(state, macro_substitute(state))
    # Bob's blank description is skipped with its prefix; muted Cara is left out (mode 1).
    assert fields.description == "<Alice Description>Alice is a knight.|"
    assert fields.scenario == "<Bob Scenario>Market day.|"
    # examples get their <START> and the prefix lands before it
    assert fields.mes_examples == "<Alice Example Messages><START>\nAda: Hi\nAlice: Hey.|"


def test_join_muted_mode_two_and_a_drafted_muted_member_keep_their_cards() -> None:
    state = _state(0, join=True, join_muted=True)
    fields = card_fields(state, macro_substitute(state))
    # {{notChar}} is Cara's view: the other unmuted members, no user
    assert fields.description == "Alice is a knight.\nCara sees Alice, Bob."
    drafted = _state(2, join=True)
    assert "Cara sees Alice, Bob." in card_fields(drafted, macro_substitute(drafted)).description


def test_chat_scenario_override_replaces_the_whole_join() -> None:
    state = _state(0, join=True)
    state = state.replace(chat_metadata=ChatMetadata(scenario="{{char}} alone."))
    assert card_fields(state, macro_substitute(state)).scenario == "Alice alone."


def test_join_depth_prompts_are_numbered_and_skip_muted_members_unless_drafted() -> None:
    state = _state(1, join=True, join_muted=True)
    fields = card_fields(state, macro_substitute(state))
    prompts = build_extension_prompts(state, None, fields)
    depth = {k: (v.value, v.depth, v.role) for k, v in prompts.items() if "DEPTH" in k}
    assert depth == {"DEPTH_PROMPT_0": ("Alice stays calm.", 2, 1)}  # muted Cara: even mode 2
    drafted = _state(2, join=True)
    fields = card_fields(drafted, macro_substitute(drafted))
    keys = [k for k in build_extension_prompts(drafted, None, fields) if "DEPTH" in k]
    assert keys == ["DEPTH_PROMPT_0", "DEPTH_PROMPT_1"]
    swap = _state(2)
    swap_fields = card_fields(swap, macro_substitute(swap))
    swap_prompts = build_extension_prompts(swap, None, swap_fields)
    assert swap_prompts["DEPTH_PROMPT"].value == "Cara hums."  # swap: the speaker's only


def _messages(state: PromptState, **kw: Any) -> list[dict[str, Any]]:
    return build_chat_completion(state, **kw).messages


def test_nudge_closes_the_history_and_names_the_speaker() -> None:
    messages = _messages(_state(0))
    assert messages[-3:] == [
        {"role": "assistant", "content": "Bob: Hello."},
        {"role": "user", "content": "Hi."},
        {"role": "system", "content": "[Write the next reply only as Alice.]"},
    ]
    custom = _messages(_state(0, nudge="Now {{char}} ({{groupNotMuted}})."))
    assert custom[-1] == {"role": "system", "content": "Now Alice (Alice, Bob)."}
    assert not any("only as" in m["content"] for m in _messages(_state(0), kind="impersonate"))
    assert _messages(_state(0, nudge=""))[-1] == {"role": "user", "content": "Hi."}


def test_new_group_chat_marker_lists_every_member() -> None:
    messages = _messages(_state(0))
    assert {
        "role": "system",
        "content": "[Start a new group chat. Group members: Alice, Bob, Cara]",
    } in messages


def test_text_completion_stops_at_every_other_member() -> None:
    state = _state(0).replace(preset=None, context=ContextTemplate(), settings=_tc_settings())
    result = build_text_completion(state)
    assert result.stop[:3] == ["\nAda:", "\nBob:", "\nCara:"]
    impersonating = build_text_completion(state, kind="impersonate")
    assert impersonating.stop[:4] == ["\nAlice:", "\nAda:", "\nBob:", "\nCara:"]
    assert "\nBob: Hello." in result.prompt


def _tc_settings() -> PromptSettings:
    return PromptSettings(main_api="textgenerationwebui")


def test_only_the_speakers_own_reasoning_goes_back_into_the_prompt() -> None:
    state = _state(0)
    bob = Message.new("Bob", "Hello.", is_user=False)
    bob.extra.reasoning = "Bob's secret plan."
    alice = Message.new("Alice", "Hm.", is_user=False)
    alice.extra.reasoning = "Alice thinks."
    state = state.replace(
        messages=[bob, alice], reasoning=ReasoningSettings(add_to_prompts=True, max_additions=5)
    )
    sent = " ".join(str(m["content"]) for m in _messages(state))
    assert "Alice thinks." in sent and "Bob's secret plan." not in sent
