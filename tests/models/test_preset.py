"""ChatCompletionPreset: defaults, prompt lookup, the active order, the legacy migration."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from tavernkit.models.preset import (
    DEFAULT_PROMPT_ORDER,
    DEFAULT_PROMPTS,
    GLOBAL_CHARACTER_ID,
    INJECTION_ABSOLUTE,
    ChatCompletionPreset,
    PromptDefinition,
    PromptOrderList,
    default_prompt,
    migrate_legacy_preset,
)


def _default_json(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / "presets" / "openai" / "Default.json").read_bytes())
    return data


# --- defaults -----------------------------------------------------------------------------------


def test_defaults_are_those_of_the_shipped_default_preset(st_default_data: Path) -> None:
    shipped = _default_json(st_default_data)
    fresh = ChatCompletionPreset.create().to_wire()
    for key, value in fresh.items():
        if key in ("prompts", "prompt_order"):
            continue
        assert key in shipped, key
        assert shipped[key] == value, key
        assert type(shipped[key]) is type(value), key


def test_defaults_documented_in_the_reference() -> None:
    p = ChatCompletionPreset()
    assert (p.openai_max_context, p.openai_max_tokens, p.names_behavior) == (4095, 300, 0)
    assert p.send_if_empty == ""
    assert p.new_chat_prompt == "[Start a new Chat]"
    assert p.new_example_chat_prompt == "[Example Chat]"
    assert p.wi_format == "{0}"
    assert p.scenario_format == "{{scenario}}"
    assert p.personality_format == "{{personality}}"
    assert p.continue_postfix == " "
    assert p.use_sysprompt is False and p.squash_system_messages is False
    assert p.continue_prefill is False


def test_prompt_definition_defaults() -> None:
    p = PromptDefinition(identifier="x")
    assert p.injection_position == 0
    assert p.injection_depth == 4
    assert p.injection_order == 100
    assert p.injection_trigger == []
    assert p.forbid_overrides is False
    assert p.enabled is None
    assert p.role == "system"


def test_default_prompt_table_matches_the_shipped_preset(st_default_data: Path) -> None:
    shipped = {p["identifier"]: p for p in _default_json(st_default_data)["prompts"]}
    table = {p["identifier"]: dict(p) for p in DEFAULT_PROMPTS}
    assert set(table) == set(shipped)
    for ident, prompt in table.items():
        expected = dict(shipped[ident])
        if ident == "main":
            # The code's table addresses groups; the shipped file uses plain {{char}}.
            expected["content"] = expected["content"].replace(
                "between {{char}}", "between {{charIfNotGroup}}"
            )
        assert prompt == expected, ident
        assert list(prompt) == list(expected), ident


def test_default_order_matches_the_shipped_global_list(st_default_data: Path) -> None:
    shipped = _default_json(st_default_data)["prompt_order"]
    global_list = next(o for o in shipped if o["character_id"] == GLOBAL_CHARACTER_ID)
    assert [(i["identifier"], i["enabled"]) for i in global_list["order"]] == list(
        DEFAULT_PROMPT_ORDER
    )


def test_default_prompts_cannot_be_changed_by_accident() -> None:
    with pytest.raises(TypeError):
        DEFAULT_PROMPTS[0]["content"] = "changed"  # type: ignore[index]
    copy_ = default_prompt("main")
    assert copy_ is not None
    copy_.content = "changed"
    fresh = default_prompt("main")
    assert fresh is not None and fresh.content != "changed"
    assert default_prompt("nope") is None


# --- lookups --------------------------------------------------------------------------------------


def test_prompt_prefers_the_preset_then_the_built_in() -> None:
    preset = ChatCompletionPreset.model_validate(
        {"prompts": [{"identifier": "main", "content": "Mine."}, {"identifier": "custom"}]}
    )
    main = preset.prompt("main")
    assert main is not None and main.content == "Mine."
    jailbreak = preset.prompt("jailbreak")
    assert jailbreak is not None and jailbreak.name == "Post-History Instructions"
    assert preset.prompt("custom") is not None
    assert preset.prompt("missing") is None


def test_effective_prompts_appends_missing_built_ins_in_table_order() -> None:
    preset = ChatCompletionPreset.model_validate(
        {"prompts": [{"identifier": "custom", "content": "c"}, {"identifier": "nsfw"}]}
    )
    idents = [p.identifier for p in preset.effective_prompts()]
    assert idents[:2] == ["custom", "nsfw"]
    assert idents[2:] == [p["identifier"] for p in DEFAULT_PROMPTS if p["identifier"] != "nsfw"]
    # Filling is a view: the preset itself and its file are unchanged.
    assert [p.identifier for p in preset.prompts] == ["custom", "nsfw"]


def test_effective_prompts_of_an_empty_preset_are_the_built_ins() -> None:
    prompts = ChatCompletionPreset().effective_prompts()
    assert [p.to_wire() for p in prompts] == [dict(p) for p in DEFAULT_PROMPTS]


def test_the_shared_built_ins_are_what_the_copies_are_and_copies_change_alone() -> None:
    """A prompt build reads the built-in prompts and order without copying them; a caller
    that takes :meth:`effective_prompts` or :meth:`active_order` gets copies, and changing
    those must not reach the next build's."""
    preset = ChatCompletionPreset()
    shared = [p.to_wire() for p in preset.effective_prompts_shared()]
    shared_order = [(i.identifier, i.enabled) for i in preset.active_order_shared()]
    assert shared == [p.to_wire() for p in preset.effective_prompts()]
    assert shared_order == [(i.identifier, i.enabled) for i in preset.active_order()]
    for prompt in preset.effective_prompts():
        prompt.content = "changed"
    for item in preset.active_order():
        item.enabled = not item.enabled
    assert [p.to_wire() for p in ChatCompletionPreset().effective_prompts_shared()] == shared
    order = ChatCompletionPreset().active_order_shared()
    assert [(i.identifier, i.enabled) for i in order] == shared_order == list(DEFAULT_PROMPT_ORDER)


def _order(cid: int | str, *idents: str) -> dict[str, Any]:
    return {"character_id": cid, "order": [{"identifier": i, "enabled": True} for i in idents]}


def test_active_order_uses_the_global_list() -> None:
    preset = ChatCompletionPreset.model_validate(
        {"prompt_order": [_order(100000, "main"), _order(100001, "chatHistory", "main")]}
    )
    assert [i.identifier for i in preset.active_order()] == ["chatHistory", "main"]


def test_active_order_falls_back_to_the_legacy_list() -> None:
    preset = ChatCompletionPreset.model_validate({"prompt_order": [_order(100000, "main")]})
    assert [i.identifier for i in preset.active_order()] == ["main"]


def test_active_order_accepts_ids_written_as_strings() -> None:
    preset = ChatCompletionPreset.model_validate({"prompt_order": [_order("100001", "scenario")]})
    assert [i.identifier for i in preset.active_order()] == ["scenario"]


def test_active_order_defaults_to_sillytaverns_order() -> None:
    order = ChatCompletionPreset().active_order()
    assert [(i.identifier, i.enabled) for i in order] == list(DEFAULT_PROMPT_ORDER)
    assert order[6].identifier == "enhanceDefinitions" and not order[6].enabled


def test_active_order_for_another_character() -> None:
    preset = ChatCompletionPreset.model_validate(
        {"prompt_order": [_order(100001, "main"), _order(7, "jailbreak")]}
    )
    assert [i.identifier for i in preset.active_order(7)] == ["jailbreak"]
    assert preset.order_list(8) is None
    # No list for that id and no legacy list: SillyTavern's default order.
    assert [(i.identifier, i.enabled) for i in preset.active_order(8)] == list(DEFAULT_PROMPT_ORDER)


def test_in_chat_prompt_fields() -> None:
    p = PromptDefinition.model_validate(
        {
            "identifier": "x",
            "injection_position": 1,
            "injection_depth": 0,
            "injection_order": 250,
            "injection_trigger": ["continue", "swipe"],
            "forbid_overrides": True,
        }
    )
    assert p.injection_position == INJECTION_ABSOLUTE
    assert (p.injection_depth, p.injection_order) == (0, 250)
    assert p.injection_trigger == ["continue", "swipe"]


# --- strict values --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        {"temperature": "0.7"},
        {"temperature": True},
        {"stream_openai": 1},
        {"openai_max_tokens": 300.0},
        {"prompts": [{"identifier": 3}]},
        {"prompt_order": [{"order": []}]},
    ],
)
def test_values_of_the_wrong_json_type_are_refused_not_coerced(data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ChatCompletionPreset.model_validate(data)


def test_ints_stay_ints_and_floats_stay_floats() -> None:
    out = ChatCompletionPreset.model_validate({"temperature": 1, "top_p": 0.5}).to_wire()
    assert out == {"temperature": 1, "top_p": 0.5}
    assert isinstance(out["temperature"], int)


# --- legacy migration -----------------------------------------------------------------------------


def test_migration_fills_built_in_prompts_and_moves_the_texts() -> None:
    old = {
        "temperature": 0.9,
        "main_prompt": "Main.",
        "nsfw_prompt": "Aux.",
        "jailbreak_prompt": "PHI.",
        "wrap_in_quotes": False,
    }
    before = copy.deepcopy(old)
    new = migrate_legacy_preset(old)
    assert old == before  # pure
    assert list(new) == ["temperature", "wrap_in_quotes", "prompts"]
    contents = {p["identifier"]: p.get("content") for p in new["prompts"]}
    assert (contents["main"], contents["nsfw"], contents["jailbreak"]) == ("Main.", "Aux.", "PHI.")
    assert [p["identifier"] for p in new["prompts"]] == [p["identifier"] for p in DEFAULT_PROMPTS]
    # The built-in table itself is untouched.
    assert default_prompt("main") is not None
    assert "Main." not in json.dumps([dict(p) for p in DEFAULT_PROMPTS])


def test_migration_writes_into_existing_prompts() -> None:
    old = {
        "prompts": [{"identifier": "main", "content": "old", "name": "Main Prompt"}],
        "main_prompt": "New main.",
        "jailbreak_prompt": "New PHI.",
    }
    new = migrate_legacy_preset(old)
    assert new["prompts"][0] == {
        "identifier": "main",
        "content": "New main.",
        "name": "Main Prompt",
    }
    # A built-in the preset lacks is added from the table, then given the legacy text.
    assert new["prompts"][1]["identifier"] == "jailbreak"
    assert new["prompts"][1]["content"] == "New PHI."
    assert len(new["prompts"]) == 2


def test_empty_legacy_texts_migrate_nothing() -> None:
    old = {"main_prompt": "", "nsfw_prompt": "", "jailbreak_prompt": "", "prompts": []}
    assert migrate_legacy_preset(old) == old


def test_only_the_non_empty_legacy_keys_are_moved() -> None:
    new = migrate_legacy_preset({"main_prompt": "M", "nsfw_prompt": ""})
    assert "main_prompt" not in new
    assert new["nsfw_prompt"] == ""
    nsfw = next(p for p in new["prompts"] if p["identifier"] == "nsfw")
    assert nsfw["content"] == ""


def test_migration_leaves_a_malformed_prompts_value_to_validation() -> None:
    new = migrate_legacy_preset({"prompts": "oops", "main_prompt": "M"})
    assert new == {"prompts": "oops", "main_prompt": "M"}
    with pytest.raises(ValidationError):
        ChatCompletionPreset.model_validate(new)


def test_names_in_completion_becomes_names_behavior() -> None:
    assert migrate_legacy_preset({"names_in_completion": True})["names_behavior"] == 1
    assert migrate_legacy_preset({"names_in_completion": False})["names_behavior"] == 0
    kept = migrate_legacy_preset({"names_in_completion": True, "names_behavior": 2})
    assert kept["names_behavior"] == 2


def test_migrated_preset_validates_and_uses_the_texts() -> None:
    preset = ChatCompletionPreset.model_validate(migrate_legacy_preset({"main_prompt": "Hi."}))
    main = preset.prompt("main")
    assert main is not None and main.content == "Hi."


def test_the_shipped_default_needs_no_migration(st_default_data: Path) -> None:
    shipped = _default_json(st_default_data)
    migrated = migrate_legacy_preset(shipped)
    assert migrated == shipped
    assert json.dumps(migrated) == json.dumps(shipped)


_texts = st.text(max_size=20)


@given(
    main=_texts,
    nsfw=_texts,
    jailbreak=_texts,
    extra=st.dictionaries(st.from_regex(r"x_[a-z]{1,5}", fullmatch=True), _texts, max_size=3),
)
def test_migration_is_idempotent_and_keeps_every_text(
    main: str, nsfw: str, jailbreak: str, extra: dict[str, str]
) -> None:
    old = {**extra, "main_prompt": main, "nsfw_prompt": nsfw, "jailbreak_prompt": jailbreak}
    once = migrate_legacy_preset(old)
    assert migrate_legacy_preset(once) == once
    for key, ident, text in (
        ("main_prompt", "main", main),
        ("nsfw_prompt", "nsfw", nsfw),
        ("jailbreak_prompt", "jailbreak", jailbreak),
    ):
        if text:
            assert key not in once
            prompt = next(p for p in once["prompts"] if p["identifier"] == ident)
            assert prompt["content"] == text
        else:
            assert once[key] == ""
    for key, value in extra.items():
        assert once[key] == value
    ChatCompletionPreset.model_validate(once)


@given(
    st.fixed_dictionaries(
        {"identifier": st.text(max_size=10)},
        optional={
            "name": _texts,
            "role": st.sampled_from(["system", "user", "assistant"]),
            "content": _texts,
            "marker": st.booleans(),
            "injection_position": st.sampled_from([0, 1]),
            "injection_depth": st.integers(0, 10_000),
            "injection_order": st.integers(-1000, 1000),
            "injection_trigger": st.lists(_texts, max_size=3),
            "forbid_overrides": st.booleans(),
            "extension": st.booleans(),
        },
    )
)
def test_prompt_definitions_round_trip(raw: dict[str, Any]) -> None:
    assert PromptDefinition.model_validate(raw).to_wire() == raw


def test_order_lists_round_trip() -> None:
    raw = {"order": [{"enabled": False, "identifier": "main", "x": 1}], "character_id": 100001}
    out = PromptOrderList.model_validate(raw).to_wire()
    assert out == raw and list(out) == list(raw)
    assert list(out["order"][0]) == ["enabled", "identifier", "x"]
