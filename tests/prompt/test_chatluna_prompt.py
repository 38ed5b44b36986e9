"""The prompt ChatLuna builds from a preset (prompt.chatluna): ChatLuna's order of prompts,
history, matched lore, input and author's note, and its lore matcher's rules."""

from __future__ import annotations

from typing import Any

import yaml

from tavernkit.models.chatluna import ChatLunaPreset
from tavernkit.prompt.chatluna import build_chatluna_prompt, match_lore
from tavernkit.text.render import PromptRenderer

PRESET = {
    "keywords": ["harbour"],
    "prompts": [
        {"role": "system", "type": "description", "content": "{name} keeps the harbour."},
        {"role": "system", "type": "scenario", "content": "Dusk at the pier."},
        {"role": "assistant", "type": "first_message", "content": "Welcome, {sender}."},
    ],
    "format_user_prompt": "{sender}: {prompt}",
    "world_lores": [
        {"scanDepth": 2, "maxRecursionDepth": 2},
        {"keywords": ["ferry"], "content": "The ferry needs a toll.", "order": 5},
        {"keywords": "toll", "content": "Two coins, paid to {name}.", "order": 1},
        {
            "keywords": ["LIGHT"],
            "content": "The lamp is lit at nine.",
            "caseSensitive": True,
            "insertPosition": "before_example_messages",
        },
        {"keywords": ["gull"], "content": "Gulls steal bread.", "enabled": False},
        {"keywords": ["cat"], "content": "A cat sleeps on the nets.", "matchWholeWord": True},
    ],
    "authors_note": {"content": "Keep {name} brief.", "insertDepth": 1},
}
VARS = {"name": "Mira", "sender": "Ada"}


def preset(**changes: Any) -> ChatLunaPreset:
    return ChatLunaPreset.model_validate({**PRESET, **changes})


def texts(*items: str) -> list[str]:
    return [lore.content or "" for lore in match_lore(preset(), list(items))]


async def test_the_prompt_is_in_chatluna_order() -> None:
    history = [
        {"role": "user", "content": "Ada: hello"},
        {"role": "assistant", "content": "Evening."},
    ]
    prompt = await build_chatluna_prompt(
        PromptRenderer(), preset(), history, "When is the ferry?", VARS
    )
    assert prompt.messages == [
        {"role": "system", "content": "Mira keeps the harbour."},
        {"role": "system", "content": "Dusk at the pier."},
        {"role": "assistant", "content": "Welcome, Ada."},
        {"role": "user", "content": "Ada: hello"},
        {"role": "assistant", "content": "Evening."},
        # in_chat at depth 1: one message before the last (counting the lore message)
        {"role": "system", "content": "Keep Mira brief."},
        # ferry matched, and through its content (recursion) toll; ordered by `order`
        {"role": "user", "content": "Two coins, paid to Mira.\nThe ferry needs a toll."},
        {"role": "user", "content": "Ada: When is the ferry?"},
    ]
    assert [lore.order for lore in prompt.lore] == [1, 5]
    assert set(prompt.variables) >= {"name", "sender", "prompt"}


async def test_a_positioned_group_goes_before_the_example_messages() -> None:
    prompt = await build_chatluna_prompt(
        PromptRenderer(), preset(authors_note=None), [], "Is the LIGHT on?", VARS
    )
    roles = [(m["role"], m["content"]) for m in prompt.messages]
    # before_example_messages without example prompts: at the first message
    assert roles[2] == ("user", "The lamp is lit at nine.")
    assert roles[3] == ("assistant", "Welcome, Ada.")


async def test_an_authors_note_after_the_character_definitions_and_frequency_zero() -> None:
    note = {"content": "Note.", "insertPosition": "after_char_defs"}
    prompt = await build_chatluna_prompt(
        PromptRenderer(), preset(authors_note=note), [], "hi", VARS
    )
    assert prompt.messages[2] == {"role": "system", "content": "Note."}  # after the scenario
    never = {"content": "Note.", "insertFrequency": 0}
    prompt = await build_chatluna_prompt(
        PromptRenderer(), preset(authors_note=never), [], "hi", VARS
    )
    assert all(m["content"] != "Note." for m in prompt.messages)


def test_lore_matching_rules() -> None:
    assert texts("light") == []  # caseSensitive
    assert texts("FERRY") == ["Two coins, paid to {name}.", "The ferry needs a toll."]  # i
    assert texts("gull") == []  # disabled
    assert texts("a cat.") == ["A cat sleeps on the nets."]
    assert texts("concatenate") == []  # whole word
    # only the last scanDepth (2) texts are read
    assert texts("ferry", "one", "two") == []
    assert texts("ferry", "one") != []


def test_recursion_stops_at_its_depth() -> None:
    chain = {
        "keywords": ["k"],
        "prompts": [],
        "world_lores": [
            {"maxRecursionDepth": 2},
            {"keywords": ["a"], "content": "then b"},
            {"keywords": ["b"], "content": "then c"},
            {"keywords": ["c"], "content": "end"},
        ],
    }
    found = match_lore(ChatLunaPreset.model_validate(chain), ["a"])
    assert [lore.content for lore in found] == ["then b", "then c"]  # c is depth 2: not read
    chain["world_lores"][0] = {"recursiveScan": False}
    found = match_lore(ChatLunaPreset.model_validate(chain), ["a"])
    assert [lore.content for lore in found] == ["then b"]


def test_a_bad_regex_keyword_is_left_out() -> None:
    bad = {
        "keywords": ["k"],
        "prompts": [],
        "world_lores": [{"keywords": ["(", "ok"], "content": "x"}],
    }
    data = yaml.safe_load(yaml.safe_dump(bad))
    assert [lore.content for lore in match_lore(ChatLunaPreset.model_validate(data), ["ok"])] == [
        "x"
    ]
