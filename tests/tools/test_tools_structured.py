"""Structured output: strict, fenced, repaired, then validated."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tavernkit.errors import GenerateTaskError
from tavernkit.tools import (
    StructuredOutputError,
    parse_structured,
    schema_instruction,
    unwrap_json_schema,
)

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "occupation": {"type": "string"},
        "email": {"type": "string", "format": "email"},
    },
    "required": ["name", "age", "occupation"],
    "additionalProperties": False,
}
ALICE = {"name": "Alice", "age": 32, "occupation": "software engineer"}


def test_strict() -> None:
    res = parse_structured(
        '  {"name": "Alice", "age": 32, "occupation": "software engineer"}\n', PERSON
    )
    assert res.data == ALICE and not res.repaired and res.source == "strict"


def test_fence_with_prose() -> None:
    body = '{"name": "Alice", "age": 32, "occupation": "software engineer"}'
    text = f"Here it is:\n```json\n{body}\n```\nBye."
    res = parse_structured(text, PERSON)
    assert res.data == ALICE and res.source == "fence" and not res.repaired


def test_repair_only_when_strict_fails() -> None:
    text = "{'name': 'Alice', 'age': 32, 'occupation': 'software engineer',}"
    res = parse_structured(text, PERSON)
    assert res.data == ALICE and res.repaired and res.source == "repair"
    fenced = "```json\n{name: 'Alice', age: 32, occupation: 'software engineer'}\n```"
    assert parse_structured(fenced, PERSON).data == ALICE


def test_schema_violation_lists_every_issue() -> None:
    text = '{"name": "Alice", "age": -1, "email": "nope", "extra": true}'
    with pytest.raises(StructuredOutputError) as info:
        parse_structured(text, PERSON)
    err = info.value
    assert err.code == "json_schema_violation"
    assert err.details["json_data"]["age"] == -1
    got = {(e["path"], e["keyword"]) for e in err.details["errors"]}
    assert got == {
        ("$", "required"),
        ("$", "additionalProperties"),
        ("$.age", "minimum"),
        ("$.email", "format"),
    }
    assert err.details["text"] == text


def test_not_json_at_all() -> None:
    with pytest.raises(StructuredOutputError) as info:
        parse_structured("I cannot do that, Dave.", PERSON)
    assert info.value.details["errors"] == []
    assert "json_data" not in info.value.details


def test_empty_reply_is_no_response() -> None:
    with pytest.raises(GenerateTaskError) as info:
        parse_structured("   ", PERSON)
    assert info.value.code == "no_response"


def test_no_schema_means_any_json() -> None:
    assert parse_structured("[1, 2]", None).data == [1, 2]


def test_unwrap_json_schema() -> None:
    assert unwrap_json_schema(PERSON) == (PERSON, "response", True)
    st_style = {"name": "person", "strict": False, "value": PERSON}
    assert unwrap_json_schema(st_style) == (PERSON, "person", False)
    assert unwrap_json_schema({"name": "p", "schema": PERSON}) == (PERSON, "p", True)
    # a schema that merely has a "name" property is not a wrapper
    props = {"type": "object", "properties": {"name": {"type": "string"}}}
    assert unwrap_json_schema(props)[0] == props
    for bad in ("x", {"type": "objekt"}, {"name": "p", "value": {"minimum": "zero"}}):
        with pytest.raises(GenerateTaskError) as info:
            unwrap_json_schema(bad)
        assert info.value.code == "invalid_input"


def test_schema_instruction() -> None:
    text = schema_instruction(PERSON)
    assert "JSON Schema" in text and '"required"' in text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(json_values, st.booleans())
def test_written_json_reads_back(value: object, fenced: bool) -> None:
    import json

    text = json.dumps(value, ensure_ascii=False)
    if fenced:
        text = f"Result:\n```json\n{text}\n```"
    res = parse_structured(text, None)
    assert res.data == value and not res.repaired
