"""Argument validation and tool_choice enforcement."""

from __future__ import annotations

import pytest

from tavernkit.errors import GenerateTaskError
from tavernkit.tools import (
    FunctionTool,
    ToolArgumentsError,
    ToolCall,
    ToolCallParseError,
    ToolChoiceSpec,
    coerce_tool_call,
    decode_arguments,
    enforce_tool_choice,
    is_tool_call_mandatory,
    normalize_tool_choice,
    resolve_required_function_name,
    validate_arguments,
    validate_calls,
)

from ._fixtures import NOTE, SEARCH, TOOLS

CONTACT = FunctionTool(
    name="contact",
    parameters={
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email"},
            "when": {"type": "string", "format": "date"},
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"const": "x"}]},
        },
        "required": ["email"],
    },
)


def test_valid_arguments_pass() -> None:
    validate_arguments(SEARCH, {"query": "cats", "limit": 3})
    validate_arguments(CONTACT, {"email": "a@b.org", "when": "2024-02-29", "pair": [1, "x"]})


def test_every_violation_with_path_and_raw_arguments() -> None:
    raw = '{"email": "nope", "when": "2024-13-40", "pair": ["1", "y"]}'
    with pytest.raises(ToolArgumentsError) as info:
        validate_arguments(CONTACT, decode_arguments("contact", raw), raw_arguments=raw)
    err = info.value
    assert err.code == "tool_call_parse"
    assert err.details["raw_arguments"] == raw
    found = {(i.path, i.keyword) for i in err.issues}
    assert found == {
        ("$.email", "format"),
        ("$.when", "format"),
        ("$.pair[0]", "type"),
        ("$.pair[1]", "const"),
    }
    assert err.details["errors"][0].keys() == {"path", "message", "keyword"}


def test_missing_required_and_extra_keys() -> None:
    with pytest.raises(ToolArgumentsError) as info:
        validate_arguments(SEARCH, {"q": "cats"})
    keywords = {i.keyword for i in info.value.issues}
    assert keywords == {"required", "additionalProperties"}


def test_broken_schema_is_invalid_input() -> None:
    bad = FunctionTool(name="bad", parameters={"type": "objekt"})
    with pytest.raises(GenerateTaskError) as info:
        validate_arguments(bad, {})
    assert info.value.code == "invalid_input"


def test_validate_calls_unknown_tool() -> None:
    with pytest.raises(ToolCallParseError) as info:
        validate_calls([ToolCall("ghost", {})], TOOLS)
    assert info.value.problem == "unknown_function"
    assert "search_web" in info.value.message
    validate_calls([ToolCall("take-note", {"text": "t"})], [NOTE])


@pytest.mark.parametrize("raw", ["{bad", "null", "[]", "1", '"text"', 5, ["a"]])
def test_non_object_arguments(raw: object) -> None:
    with pytest.raises(ToolCallParseError) as info:
        decode_arguments("f", raw)
    assert info.value.details["raw_arguments"]


def test_empty_arguments_are_an_empty_object() -> None:
    assert (
        decode_arguments("f", "")
        == {}
        == decode_arguments("f", None)
        == decode_arguments("f", "  ")
    )


def test_coerce_call_shapes() -> None:
    class Accumulated:
        id = "c9"
        name = "f"
        arguments = '{"x": 1}'

    for raw in (
        {"id": "c9", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
        {"id": "c9", "name": "f", "input": {"x": 1}},
        {"id": "c9", "name": "f", "args": {"x": 1}},
        Accumulated(),
    ):
        call = coerce_tool_call(raw)
        assert (call.name, call.args, call.id) == ("f", {"x": 1}, "c9")
        assert call.raw is raw
    with pytest.raises(ToolCallParseError):
        coerce_tool_call({"function": {"arguments": "{}"}})


@pytest.mark.parametrize(
    ("value", "spec"),
    [
        (None, ToolChoiceSpec("auto")),
        ("auto", ToolChoiceSpec("auto")),
        ("none", ToolChoiceSpec("none")),
        ("required", ToolChoiceSpec("required")),
        ("any", ToolChoiceSpec("required")),
        ({"type": "function", "function": {"name": "f"}}, ToolChoiceSpec("named", "f")),
        ({"name": "f"}, ToolChoiceSpec("named", "f")),
    ],
)
def test_normalize_tool_choice(value: object, spec: ToolChoiceSpec) -> None:
    assert normalize_tool_choice(value) == spec


@pytest.mark.parametrize("value", ["sometimes", {"type": "function"}, 3, {"name": ""}])
def test_bad_tool_choice(value: object) -> None:
    with pytest.raises(GenerateTaskError) as info:
        normalize_tool_choice(value)
    assert info.value.code == "invalid_input"


def test_required_name_and_mandatory() -> None:
    named = ToolChoiceSpec("named", "f")
    assert resolve_required_function_name(named, None) == "f"
    assert resolve_required_function_name(named, " g ") == "g"
    assert resolve_required_function_name(ToolChoiceSpec("auto"), None) is None
    assert is_tool_call_mandatory(ToolChoiceSpec("required"), None)
    assert is_tool_call_mandatory(ToolChoiceSpec("auto"), "f")
    assert not is_tool_call_mandatory(ToolChoiceSpec("auto"), None)
    assert not is_tool_call_mandatory(ToolChoiceSpec("none"), None)


A = ToolCall("search_web", {"query": "a"})
B = ToolCall("take-note", {"text": "b"})
NAMES = ["search_web", "take-note"]


def test_enforce_auto_and_none() -> None:
    assert enforce_tool_choice([A, B], ToolChoiceSpec("auto")) == [A, B]
    assert enforce_tool_choice([], ToolChoiceSpec("auto")) == []
    assert enforce_tool_choice([], ToolChoiceSpec("none")) == []
    with pytest.raises(ToolCallParseError, match="tool_choice is 'none'"):
        enforce_tool_choice([A], ToolChoiceSpec("none"))


def test_enforce_required_and_named() -> None:
    with pytest.raises(GenerateTaskError) as info:
        enforce_tool_choice([], ToolChoiceSpec("required"))
    assert info.value.code == "tool_call_missing"
    assert enforce_tool_choice([A, B], ToolChoiceSpec("named", "take-note"), available=NAMES) == [B]
    with pytest.raises(GenerateTaskError) as info:
        enforce_tool_choice([A], ToolChoiceSpec("named", "take-note"), available=NAMES)
    assert info.value.code == "tool_call_missing"
    assert info.value.details["called"] == ["search_web"]


def test_enforce_required_function_name() -> None:
    kept = enforce_tool_choice([A, B], ToolChoiceSpec("auto"), required_function_name="take-note")
    assert kept == [A, B]
    with pytest.raises(GenerateTaskError) as info:
        enforce_tool_choice([A], ToolChoiceSpec("auto"), required_function_name="take-note")
    assert info.value.code == "tool_call_missing"
    with pytest.raises(GenerateTaskError) as info:
        enforce_tool_choice([A], ToolChoiceSpec("named", "ghost"), available=NAMES)
    assert info.value.code == "invalid_input"
