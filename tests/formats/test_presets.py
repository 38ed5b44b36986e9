"""Preset and template files: detection, lossless round trips, legacy keys, bad input."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavernkit.errors import FormatError, LimitExceeded
from tavernkit.formats.file_io import FormatLimits
from tavernkit.formats.presets import (
    PRESET_KINDS,
    PresetKind,
    kind_of,
    preset_kind,
    preset_to_json,
    read_preset,
    read_preset_file,
    write_preset,
)
from tavernkit.models.base import WireModel
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.samplers import KoboldSettings, NovelSettings, TextGenSettings
from tavernkit.models.templates import (
    ContextTemplate,
    InstructTemplate,
    ReasoningTemplate,
    SystemPrompt,
)

KINDS = sorted(PRESET_KINDS)


def shipped_files(root: Path, kind: str) -> list[Path]:
    files = sorted((root / "presets" / kind).glob("*.json"))
    assert files, f"no shipped {kind} presets under {root}"
    return files


# --- every file SillyTavern ships -------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_every_shipped_file_is_detected_as_its_folder(st_default_data: Path, kind: str) -> None:
    wrong = {
        f.name: preset_kind(json.loads(f.read_bytes()))
        for f in shipped_files(st_default_data, kind)
        if preset_kind(json.loads(f.read_bytes())) != kind
    }
    assert wrong == {}


@pytest.mark.parametrize("kind", KINDS)
def test_every_shipped_file_round_trips_exactly(st_default_data: Path, kind: PresetKind) -> None:
    for path in shipped_files(st_default_data, kind):
        original = json.loads(path.read_bytes())
        preset = read_preset_file(path)
        assert isinstance(preset, PRESET_KINDS[kind]), path.name
        assert kind_of(preset) == kind
        out = preset_to_json(preset)
        assert out == original, path.name
        # Same key order, at every level (SillyTavern hashes and diffs files in key order).
        assert json.dumps(out) == json.dumps(original), path.name


def test_shipped_files_survive_a_write_to_disk(st_default_data: Path, tmp_path: Path) -> None:
    for kind in KINDS:
        for path in shipped_files(st_default_data, kind):
            preset = read_preset_file(path)
            target = tmp_path / kind / path.name
            target.parent.mkdir(exist_ok=True)
            write_preset(preset, target)
            assert json.loads(target.read_text("utf-8")) == json.loads(path.read_bytes())
            again = read_preset_file(target)
            assert preset_to_json(again) == preset_to_json(preset)
    leftovers = [p.name for p in tmp_path.rglob(".*.tmp")]
    assert leftovers == []


def test_shipped_default_chat_preset_reads_as_documented(st_default_data: Path) -> None:
    preset = read_preset_file(st_default_data / "presets" / "openai" / "Default.json")
    assert isinstance(preset, ChatCompletionPreset)
    assert preset.openai_max_context == 4095
    assert preset.temperature == 1 and isinstance(preset.temperature, int)
    assert [item.identifier for item in preset.active_order()][:3] == [
        "main",
        "worldInfoBefore",
        "personaDescription",
    ]
    # Keys we do not type are kept as they were.
    assert preset.model_extra is not None
    assert preset.model_extra["minimax_endpoint"] == "global"


def test_written_file_is_four_space_json(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    write_preset(ReasoningTemplate.create(name="Ünïcode"), target)
    text = target.read_text("utf-8")
    assert text.startswith('{\n    "name": "Ünïcode"')


# --- detection ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        ({"main_prompt": "old", "temperature": 0.9}, "openai"),
        ({"openai_max_tokens": 100}, "openai"),
        ({"prompts": []}, "openai"),
        ({"separator_sequence": "\n", "names": True}, "instruct"),
        ({"input_sequence": "U:", "story_string_prefix": ""}, "instruct"),
        ({"story_string": "{{description}}"}, "context"),
        ({"name": "x", "content": "y"}, "sysprompt"),
        ({"content": "y", "post_history": ""}, "sysprompt"),
        ({"prefix": "<t>", "suffix": "</t>", "separator": ""}, "reasoning"),
        ({"temp": 0.7, "rep_pen": 1.1}, "textgen"),
        ({"temp": 0.7, "rep_pen": 1.1, "typical": 1}, "kobold"),
        ({"temp": 1, "rep_pen": 1, "sampler_order": [6, 0]}, "kobold"),
        ({"temp": 1, "rep_pen": 1, "sampler_order": [6, 0], "typical_p": 1}, "textgen"),
        ({"order": [1], "prefix": "vanilla", "phrase_rep_pen": "off"}, "novel"),
        ({"temperature": 1, "tail_free_sampling": 0.9}, "novel"),
        ({"name": "x", "content": "y", "something": 1}, None),
        ({"temperature": 1}, None),
        ({}, None),
        ([1, 2], None),
        ("text", None),
    ],
)
def test_kind_is_told_from_the_keys(data: Any, kind: str | None) -> None:
    assert preset_kind(data) == kind


def test_explicit_kind_skips_detection() -> None:
    preset = read_preset({"name": "x", "content": "y", "something": 1}, kind="sysprompt")
    assert isinstance(preset, SystemPrompt)
    assert preset_to_json(preset) == {"name": "x", "content": "y", "something": 1}


# --- legacy keys --------------------------------------------------------------------------------


def test_reading_an_old_chat_preset_migrates_its_prompts() -> None:
    data = {"temperature": 0.9, "main_prompt": "Be {{char}}.", "jailbreak_prompt": "Stay."}
    preset = read_preset(json.dumps(data).encode())
    assert isinstance(preset, ChatCompletionPreset)
    main, jailbreak = preset.prompt("main"), preset.prompt("jailbreak")
    assert main is not None and main.content == "Be {{char}}."
    assert jailbreak is not None and jailbreak.content == "Stay."
    out = preset_to_json(preset)
    assert "main_prompt" not in out and "jailbreak_prompt" not in out
    assert out["temperature"] == 0.9
    assert [p["identifier"] for p in out["prompts"]][:4] == [
        "main",
        "nsfw",
        "dialogueExamples",
        "jailbreak",
    ]


def test_reading_an_old_instruct_template_migrates_it() -> None:
    data = {
        "name": "Old",
        "input_sequence": "### Instruction:",
        "separator_sequence": "</s>",
        "names": False,
        "names_force_groups": True,
        "system_sequence_prefix": "",
    }
    preset = read_preset(data)
    assert isinstance(preset, InstructTemplate)
    assert preset.output_suffix == "</s>"
    assert preset.names_behavior == "force"
    out = preset_to_json(preset)
    assert list(out)[:3] == ["name", "input_sequence", "output_suffix"]
    assert not {"separator_sequence", "names", "names_force_groups"} & set(out)


# --- bad input ----------------------------------------------------------------------------------


def _error(data: Any, **kw: Any) -> FormatError:
    with pytest.raises(FormatError) as info:
        read_preset(data, source="p.json", **kw)
    assert info.value.source == "p.json"
    return info.value


def test_invalid_json_names_the_source() -> None:
    err = _error(b'{"story_string": ')
    assert "invalid JSON" in str(err)


def test_invalid_utf8_is_a_format_error() -> None:
    err = _error(b'{"story_string": "\xff"}')
    assert "UTF-8" in str(err)


def test_a_bom_is_tolerated() -> None:
    preset = read_preset('\ufeff{"story_string": "x"}'.encode())
    assert isinstance(preset, ContextTemplate)


def test_a_json_array_is_not_a_preset() -> None:
    assert "JSON object" in str(_error(b"[1, 2]"))


def test_unrecognised_content_is_refused() -> None:
    assert "not a recognised preset" in str(_error({"hello": "world"}))


def test_unknown_kind_names_the_kind_field() -> None:
    assert _error({"story_string": ""}, kind="banana").field == "kind"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (
            {"prompts": [{"identifier": "main"}, {"injection_depth": "4"}]},
            "prompts[1].injection_depth",
        ),
        (
            {"prompts": [], "prompt_order": [{"character_id": 100001, "order": [{}]}]},
            "prompt_order[0].order[0].identifier",
        ),
        ({"prompts": [], "temperature": True}, "temperature"),
        ({"prompts": [], "openai_max_context": 4095.5}, "openai_max_context"),
        ({"input_sequence": "", "names_behavior": "sometimes"}, "names_behavior"),
        ({"input_sequence": "", "wrap": 1}, "wrap"),
        ({"story_string": None}, "story_string"),
        ({"name": "x", "content": 5}, "content"),
        ({"temp": 1, "rep_pen": 1, "sampler_order": ["6"]}, "sampler_order[0]"),
        ({"order": "1,2", "phrase_rep_pen": "off"}, "order"),
    ],
)
def test_a_wrong_value_names_the_field(data: dict[str, Any], field: str) -> None:
    assert _error(data).field == field


def test_a_huge_text_field_is_refused() -> None:
    limits = FormatLimits(text_field_chars=10)
    data = {"prompts": [{"identifier": "main", "content": "x" * 11}]}
    with pytest.raises(LimitExceeded) as info:
        read_preset(data, source="big.json", limits=limits)
    assert info.value.field == "prompts[0].content"


def test_a_huge_file_is_refused_before_parsing(tmp_path: Path) -> None:
    limits = FormatLimits(card_json_bytes=100)
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"story_string": "x" * 200}))
    with pytest.raises(LimitExceeded):
        read_preset_file(path, limits=limits)
    with pytest.raises(LimitExceeded):
        read_preset(path.read_bytes(), limits=limits)


def test_a_missing_file_is_a_format_error(tmp_path: Path) -> None:
    with pytest.raises(FormatError):
        read_preset_file(tmp_path / "nope.json")


def test_a_lone_surrogate_escape_survives_a_write(tmp_path: Path) -> None:
    # JSON allows "\ud800"; Python reads it as a lone surrogate, which UTF-8 cannot carry.
    preset = read_preset(b'{"name": "x", "content": "a\\ud800b"}')
    target = tmp_path / "s.json"
    write_preset(preset, target)
    assert '"a\\ud800b"' in target.read_text("utf-8")
    assert preset_to_json(read_preset_file(target)) == {"name": "x", "content": "a\ud800b"}


def test_a_failed_write_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "keep.json"
    target.write_text("old")

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("tavernkit.formats.file_io.os.fsync", disk_full)
    with pytest.raises(OSError):
        write_preset(SystemPrompt.create(), target)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.json"]


# --- property: write -> read is the identity, for every kind ------------------------------------

_JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
_JSON = st.recursive(
    _JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def _for_annotation(tp: Any) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(tp)
    if tp is Any:
        return _JSON
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.integers(-(2**53), 2**53)
    if tp is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if tp is str:
        return st.text(max_size=30)
    if tp is type(None):
        return st.none()
    if isinstance(tp, type) and issubclass(tp, WireModel):
        return model_dicts(tp)
    if origin is typing.Literal:
        return st.sampled_from(typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(_for_annotation(arg) for arg in typing.get_args(tp)))
    if origin is list:
        return st.lists(_for_annotation(typing.get_args(tp)[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(st.text(max_size=5), _JSON, max_size=3)
    raise AssertionError(f"no strategy for {tp!r}")


@st.composite
def model_dicts(draw: st.DrawFn, model: type[WireModel]) -> dict[str, Any]:
    """A JSON object for ``model``: some of its fields, some unknown keys, in a random order."""
    items: list[tuple[str, Any]] = []
    for name, info in model.model_fields.items():
        if info.is_required() or draw(st.booleans()):
            items.append((info.alias or name, draw(_for_annotation(info.annotation))))
    extras = draw(
        st.dictionaries(st.from_regex(r"x_[a-z]{1,6}", fullmatch=True), _JSON, max_size=3)
    )
    items.extend(extras.items())
    return dict(draw(st.permutations(items)))


@pytest.mark.parametrize("kind", KINDS)
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_write_then_read_is_identity(kind: PresetKind, data: st.DataObject, tmp_path: Path) -> None:
    raw = data.draw(model_dicts(PRESET_KINDS[kind]))
    preset = read_preset(raw, kind=kind)
    assert preset_to_json(preset) == raw
    assert list(preset_to_json(preset)) == list(raw)
    target = tmp_path / "p.json"
    write_preset(preset, target)
    again = read_preset_file(target, kind=kind)
    assert preset_to_json(again) == raw
    assert json.dumps(preset_to_json(again)) == json.dumps(raw)


@pytest.mark.parametrize(
    "model",
    [
        ChatCompletionPreset,
        InstructTemplate,
        ContextTemplate,
        SystemPrompt,
        ReasoningTemplate,
        TextGenSettings,
        KoboldSettings,
        NovelSettings,
    ],
)
def test_a_new_record_of_every_kind_is_detected_and_round_trips(model: type[WireModel]) -> None:
    fresh = model.create()
    raw = fresh.to_wire()
    assert list(raw) == list(model.model_fields)
    preset = read_preset(json.dumps(raw))
    assert type(preset) is model
    assert preset_to_json(preset) == raw
