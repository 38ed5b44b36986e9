"""The Handlebars subset of story strings, and every shipped context/instruct template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavernkit.errors import FormatError
from tavernkit.models.templates import ContextTemplate, InstructTemplate, migrate_legacy_instruct
from tavernkit.prompt.instruct import (
    InstructNames,
    format_instruct_chat,
    format_instruct_prompt,
    instruct_stop_sequences,
)
from tavernkit.prompt.state import names_only_substitute
from tavernkit.prompt.story_string import handlebars_truthy, render_story_string

SUB = names_only_substitute("User", "Aria")


@pytest.mark.parametrize(
    ("value", "truthy"),
    [
        ("", False),
        (None, False),
        (False, False),
        (0, False),
        ([], False),
        ("0", True),
        ("false", True),
        (" ", True),
        (1, True),
        (["x"], True),
    ],
)
def test_handlebars_truthiness(value: object, truthy: bool) -> None:
    assert handlebars_truthy(value) is truthy


def test_if_else_unless_and_values() -> None:
    template = "{{#if a}}A={{a}}{{else}}no a{{/if}}|{{#unless b}}no b{{/unless}}|{{{c}}}"
    assert render_story_string(template, {"a": "0", "b": "", "c": "<&>"}) == "A=0|no b|<&>"
    assert render_story_string(template, {"a": "", "b": "x", "c": ""}) == "no a||"


def test_trim_is_kept_literal_and_unknown_mustaches_go_to_the_macro_engine() -> None:
    seen: list[str] = []

    def missing(text: str) -> str:
        seen.append(text)
        return "M"

    out = render_story_string("{{x}}{{trim}}{{random::a::b}}{{nope}}", {"x": "X"}, missing)
    assert out == "X{{trim}}MM"
    assert seen == ["{{random::a::b}}", "{{nope}}"]


def test_standalone_block_lines_and_tilde() -> None:
    source = "start\n  {{#if a}}\n  body\n  {{/if}}\nend {{~ x ~}} !"
    assert render_story_string(source, {"a": True, "x": "X"}) == "start\n  body\nendX!"


def test_comments_and_malformed_blocks() -> None:
    assert render_story_string("a{{! hidden }}{{!-- also }} --}}b", {}) == "ab"
    with pytest.raises(FormatError):
        render_story_string("{{#if a}}open", {"a": 1})
    with pytest.raises(FormatError):
        render_story_string("{{/if}}", {})


def _templates(root: Path, kind: str) -> list[Path]:
    files = sorted((root / "presets" / kind).glob("*.json"))
    assert files, f"no {kind} templates under {root}"
    return files


def test_every_shipped_context_template_loads_and_renders(st_default_data: Path) -> None:
    params = {
        "system": "SYS",
        "description": "DESC",
        "personality": "PERS",
        "scenario": "SCEN",
        "persona": "PERSONA",
        "char": "Aria",
        "user": "User",
        "wiBefore": "WIB",
        "wiAfter": "WIA",
        "loreBefore": "WIB",
        "loreAfter": "WIA",
        "anchorBefore": "",
        "anchorAfter": "",
        "mesExamples": "",
        "mesExamplesRaw": "",
    }
    files = _templates(st_default_data, "context")
    assert len(files) == 34
    for path in files:
        context = ContextTemplate.model_validate(json.loads(path.read_text(encoding="utf-8")))
        out = render_story_string(context.story_string, params, SUB)
        assert "DESC" in out, path.name
        assert "{{#" not in out and "{{/" not in out, path.name


def test_every_shipped_instruct_template_formats_messages(st_default_data: Path) -> None:
    names = InstructNames(user="User", char="Aria")
    files = _templates(st_default_data, "instruct")
    assert len(files) == 38
    for path in files:
        raw = migrate_legacy_instruct(json.loads(path.read_text(encoding="utf-8")))
        instruct = InstructTemplate.model_validate(raw)
        user = format_instruct_chat(
            instruct, SUB, names, name="User", text="hello", is_user=True, is_narrator=False
        )
        bot = format_instruct_chat(
            instruct, SUB, names, name="Aria", text="hi", is_user=False, is_narrator=False
        )
        assert "hello" in user and "hi" in bot, path.name
        line = format_instruct_prompt(instruct, SUB, names, name="Aria")
        assert "{{name}}" not in line.lower(), path.name
        for stop in instruct_stop_sequences(instruct, SUB, names):
            assert stop.strip(), path.name


def test_chatml_message_and_prompt_line() -> None:
    chatml = InstructTemplate(
        input_sequence="<|im_start|>user",
        output_sequence="<|im_start|>assistant",
        system_sequence="<|im_start|>system",
        input_suffix="<|im_end|>\n",
        output_suffix="<|im_end|>\n",
        system_suffix="<|im_end|>\n",
        stop_sequence="<|im_end|>",
    )
    names = InstructNames(user="User", char="Aria")
    assert (
        format_instruct_chat(
            chatml, SUB, names, name="User", text="Hi", is_user=True, is_narrator=False
        )
        == "<|im_start|>user\nHi<|im_end|>\n"
    )
    assert (
        format_instruct_chat(
            chatml, SUB, names, name="", text="Note", is_user=False, is_narrator=True
        )
        == "<|im_start|>system\nNote<|im_end|>\n"
    )
    assert format_instruct_prompt(chatml, SUB, names, name="Aria") == ("\n<|im_start|>assistant\n")
    assert instruct_stop_sequences(chatml, SUB, names) == [
        "\n<|im_end|>",
        "\n<|im_start|>user",
        "\n<|im_start|>assistant",
        "\n<|im_start|>system",
    ]
