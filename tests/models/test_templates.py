"""Instruct, context, system-prompt and reasoning templates; the legacy instruct migration."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from tavernkit.models.settings import ReasoningSettings
from tavernkit.models.templates import (
    DEFAULT_STORY_STRING,
    ContextTemplate,
    InstructTemplate,
    ReasoningTemplate,
    SystemPrompt,
    builtin_reasoning_template,
    migrate_legacy_instruct,
)

INSTRUCT_KEYS = [
    "input_sequence",
    "input_suffix",
    "output_sequence",
    "output_suffix",
    "system_sequence",
    "system_suffix",
    "last_system_sequence",
    "first_input_sequence",
    "last_input_sequence",
    "first_output_sequence",
    "last_output_sequence",
    "story_string_prefix",
    "story_string_suffix",
    "stop_sequence",
    "wrap",
    "macro",
    "names_behavior",
    "activation_regex",
    "skip_examples",
    "system_same_as_user",
    "sequences_as_stop_strings",
    "user_alignment_message",
    "name",
]


def _files(root: Path, kind: str) -> list[Path]:
    files = sorted((root / "presets" / kind).glob("*.json"))
    assert files
    return files


# --- shipped files ------------------------------------------------------------------------------


def test_every_shipped_instruct_template_has_every_typed_field(st_default_data: Path) -> None:
    typed = set(InstructTemplate.model_fields) - {"enabled", "preset", "bind_to_context"}
    assert typed == set(INSTRUCT_KEYS)
    for path in _files(st_default_data, "instruct"):
        raw = json.loads(path.read_bytes())
        assert set(raw) == typed, path.name
        template = InstructTemplate.model_validate(raw)
        assert template.model_extra == {}
        assert template.to_wire() == raw


@pytest.mark.parametrize(
    ("kind", "model"),
    [("context", ContextTemplate), ("sysprompt", SystemPrompt), ("reasoning", ReasoningTemplate)],
)
def test_every_shipped_template_is_fully_typed_and_round_trips(
    st_default_data: Path, kind: str, model: type[Any]
) -> None:
    for path in _files(st_default_data, kind):
        raw = json.loads(path.read_bytes())
        template = model.model_validate(raw)
        assert template.model_extra == {}, path.name
        out = template.to_wire()
        assert out == raw and list(out) == list(raw), path.name


def test_shipped_instruct_files_need_no_migration(st_default_data: Path) -> None:
    for path in _files(st_default_data, "instruct"):
        raw = json.loads(path.read_bytes())
        migrated = migrate_legacy_instruct(raw)
        assert json.dumps(migrated) == json.dumps(raw), path.name


def test_chatml_reads_as_expected(st_default_data: Path) -> None:
    raw = json.loads((st_default_data / "presets" / "instruct" / "ChatML.json").read_bytes())
    t = InstructTemplate.model_validate(raw)
    assert t.input_sequence == "<|im_start|>user"
    assert t.output_suffix == "<|im_end|>\n"
    assert t.stop_sequence == "<|im_end|>"
    assert t.names_behavior == "force"
    assert t.story_string_prefix == "<|im_start|>system"


def test_reasoning_templates_match_the_reference_table(st_default_data: Path) -> None:
    table = {
        "Think XML": ("<think>", "</think>", "\n"),
        "DeepSeek": ("<think>\n", "\n</think>", "\n\n"),
        "Gemma 4": ("<|channel>thought\n", "<channel|>", "\n\n"),
        "OpenAI Harmony": (
            "<|start|>assistant<|channel|>analysis<|message|>",
            "<|start|>assistant<|channel|>final<|message|>",
            "",
        ),
        "Blank": ("", "", ""),
    }
    for path in _files(st_default_data, "reasoning"):
        t = ReasoningTemplate.model_validate(json.loads(path.read_bytes()))
        assert (t.prefix, t.suffix, t.separator) == table[t.name]


def test_the_built_in_reasoning_templates_are_the_shipped_ones(st_default_data: Path) -> None:
    shipped = [json.loads(p.read_bytes()) for p in _files(st_default_data, "reasoning")]
    assert shipped
    for raw in shipped:
        built_in = builtin_reasoning_template(raw["name"])
        assert built_in is not None and built_in.to_wire() == {
            k: raw[k] for k in ("name", "prefix", "suffix", "separator")
        }


def test_the_built_in_reasoning_template_by_name() -> None:
    default = builtin_reasoning_template(ReasoningSettings().template)
    assert default == ReasoningTemplate()  # the selected default is SillyTavern's power_user one
    deepseek = builtin_reasoning_template("DeepSeek")
    assert deepseek is not None and (deepseek.prefix, deepseek.suffix) == (
        "<think>\n",
        "\n</think>",
    )
    assert builtin_reasoning_template("deepseek") is None  # names are exact, as SillyTavern's
    assert builtin_reasoning_template("Mine") is None
    assert builtin_reasoning_template("DeepSeek") is not deepseek  # a new value each call


# --- defaults ---------------------------------------------------------------------------------


def test_instruct_defaults_are_power_user_defaults() -> None:
    t = InstructTemplate()
    assert (t.input_sequence, t.output_sequence) == ("### Instruction:", "### Response:")
    assert t.wrap and t.macro and t.sequences_as_stop_strings
    assert t.names_behavior == "force"
    assert not t.skip_examples and not t.system_same_as_user
    assert t.output_suffix == "" and t.story_string_prefix == ""


def test_context_defaults_are_power_user_defaults() -> None:
    c = ContextTemplate()
    assert c.story_string == DEFAULT_STORY_STRING
    assert "{{char}}'s personality: {{personality}}" in c.story_string
    assert (c.chat_start, c.example_separator) == ("***", "***")
    assert (c.story_string_position, c.story_string_depth, c.story_string_role) == (0, 1, 0)
    assert c.use_stop_strings and c.names_as_stop_strings


def test_sysprompt_and_reasoning_defaults() -> None:
    s = SystemPrompt()
    assert s.name == "Neutral - Chat"
    assert s.content.startswith("Write {{char}}'s next reply")
    assert s.post_history == ""
    r = ReasoningTemplate()
    assert (r.name, r.prefix, r.suffix, r.separator) == ("Think XML", "<think>", "</think>", "\n")


def test_settings_json_blocks_parse_with_their_runtime_keys(st_default_data: Path) -> None:
    power_user = json.loads((st_default_data / "settings.json").read_bytes())["power_user"]
    instruct = InstructTemplate.model_validate(power_user["instruct"])
    assert instruct.enabled is False and instruct.preset == "Alpaca"
    context = ContextTemplate.model_validate(power_user["context"])
    assert context.preset == "Default"
    sysprompt = SystemPrompt.model_validate(power_user["sysprompt"])
    assert sysprompt.enabled is True
    assert sysprompt.to_wire() == power_user["sysprompt"]


@pytest.mark.parametrize(
    ("model", "data"),
    [
        (InstructTemplate, {"names_behavior": "sometimes"}),
        (InstructTemplate, {"wrap": "true"}),
        (ContextTemplate, {"story_string_position": "0"}),
        (ContextTemplate, {"story_string_depth": 1.5}),
        (SystemPrompt, {"content": None}),
        (ReasoningTemplate, {"prefix": 1}),
    ],
)
def test_wrong_types_are_refused(model: type[Any], data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        model.model_validate(data)


# --- legacy instruct migration ----------------------------------------------------------------


def test_separator_sequence_becomes_output_suffix_in_place() -> None:
    old = {"name": "X", "separator_sequence": "</s>", "input_sequence": "[INST]"}
    before = copy.deepcopy(old)
    new = migrate_legacy_instruct(old)
    assert old == before  # pure
    assert list(new)[:3] == ["name", "output_suffix", "input_sequence"]
    assert new["output_suffix"] == "</s>"
    assert "separator_sequence" not in new


@pytest.mark.parametrize("empty", ["", None])
def test_an_empty_separator_gives_an_empty_suffix(empty: str | None) -> None:
    assert migrate_legacy_instruct({"separator_sequence": empty})["output_suffix"] == ""


def test_the_separator_wins_over_an_existing_output_suffix() -> None:
    new = migrate_legacy_instruct({"output_suffix": "a", "separator_sequence": "b"})
    assert new["output_suffix"] == "b"
    assert list(new).count("output_suffix") == 1


@pytest.mark.parametrize(
    ("names", "force_groups", "expected"),
    [
        (True, False, "always"),
        (True, True, "always"),
        (False, True, "force"),
        (False, False, "none"),
    ],
)
def test_names_flags_become_names_behavior(names: bool, force_groups: bool, expected: str) -> None:
    new = migrate_legacy_instruct({"names": names, "names_force_groups": force_groups})
    assert new["names_behavior"] == expected
    assert "names" not in new and "names_force_groups" not in new


def test_force_groups_alone_keeps_the_default_behaviour() -> None:
    new = migrate_legacy_instruct({"names_force_groups": False, "names_behavior": "always"})
    assert new["names_behavior"] == "always"
    assert "names_force_groups" not in new


def test_obsolete_system_sequence_keys_are_dropped() -> None:
    new = migrate_legacy_instruct(
        {"system_sequence_prefix": "<<SYS>>", "system_sequence_suffix": "<</SYS>>"}
    )
    assert "system_sequence_prefix" not in new and "system_sequence_suffix" not in new


def test_a_migrated_template_gets_the_newer_keys() -> None:
    old = {
        "name": "Llama2 (legacy)",
        "wrap": True,
        "macro": False,
        "separator_sequence": "</s>",
        "input_sequence": "[INST] ",
        "output_sequence": " [/INST]",
        "stop_sequence": "</s>",
        "names": True,
        "names_force_groups": True,
        "activation_regex": "/llama-?2/i",
    }
    new = migrate_legacy_instruct(old)
    assert new["names_behavior"] == "always"
    for key, value in {
        "input_suffix": "",
        "system_sequence": "",
        "system_suffix": "",
        "user_alignment_message": "",
        "last_system_sequence": "",
        "first_input_sequence": "",
        "last_input_sequence": "",
        "skip_examples": False,
        "system_same_as_user": False,
        "sequences_as_stop_strings": True,
        "story_string_prefix": "",
        "story_string_suffix": "",
    }.items():
        assert new[key] == value, key
    assert new["macro"] is False and new["activation_regex"] == "/llama-?2/i"
    t = InstructTemplate.model_validate(new)
    assert t.output_suffix == "</s>" and t.names_behavior == "always"


def test_a_current_template_is_returned_unchanged() -> None:
    current = {"input_sequence": "U", "names_behavior": "none", "x_custom": [1]}
    new = migrate_legacy_instruct(current)
    assert new == current and list(new) == list(current)
    new["x_custom"].append(2)
    assert current["x_custom"] == [1]  # a copy, not the caller's data


_legacy = st.fixed_dictionaries(
    {},
    optional={
        "name": st.text(max_size=10),
        "input_sequence": st.text(max_size=10),
        "separator_sequence": st.none() | st.text(max_size=10),
        "output_suffix": st.text(max_size=10),
        "names": st.booleans(),
        "names_force_groups": st.booleans(),
        "system_sequence_prefix": st.text(max_size=10),
        "system_sequence_suffix": st.text(max_size=10),
        "wrap": st.booleans(),
    },
)


@given(_legacy)
def test_instruct_migration_is_idempotent_and_valid(old: dict[str, Any]) -> None:
    once = migrate_legacy_instruct(old)
    assert migrate_legacy_instruct(once) == once
    InstructTemplate.model_validate(once)
    if "separator_sequence" in old:
        assert once["output_suffix"] == (old["separator_sequence"] or "")


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "story_string": st.text(max_size=30),
            "chat_start": st.text(max_size=5),
            "story_string_position": st.sampled_from([0, 1, 2]),
            "story_string_depth": st.integers(0, 100),
            "story_string_role": st.sampled_from([0, 1, 2]),
            "always_force_name2": st.booleans(),
            "x_other": st.integers() | st.text(max_size=5),
        },
    ),
    st.randoms(use_true_random=False),
)
def test_context_templates_round_trip_in_any_key_order(raw: dict[str, Any], rnd: Any) -> None:
    items = list(raw.items())
    rnd.shuffle(items)
    shuffled = dict(items)
    out = ContextTemplate.model_validate(shuffled).to_wire()
    assert out == shuffled and list(out) == list(shuffled)
