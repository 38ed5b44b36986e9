"""Call identity: name + canonical JSON arguments, ids ignored."""

from __future__ import annotations

import json
import random

from hypothesis import given
from hypothesis import strategies as st

from tavernkit.tools import ToolCall, call_identity, canonical_json, coerce_tool_call

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=5)


@given(json_objects, st.integers(0, 2**32))
def test_key_order_and_whitespace_do_not_matter(args: dict, seed: int) -> None:
    items = list(args.items())
    random.Random(seed).shuffle(items)
    shuffled = dict(items)
    pretty = json.dumps(shuffled, indent=3)
    assert call_identity("f", args) == call_identity("f", shuffled) == call_identity("f", pretty)


@given(json_objects)
def test_canonical_json_round_trips(args: dict) -> None:
    text = canonical_json(args)
    assert json.loads(text) == args
    assert " " not in text.replace(" ", "") and "\n" not in canonical_json({"a": [1, 2]})


def test_name_and_args_distinguish() -> None:
    assert call_identity("f", {"a": 1}) != call_identity("g", {"a": 1})
    assert call_identity("f", {"a": 1}) != call_identity("f", {"a": 2})
    assert call_identity("f", {"a": 1}) != call_identity("f", {"a": "1"})
    # a name/argument split cannot collide
    assert call_identity("f", "x") != call_identity("fx", "")
    assert len(call_identity("f", {})) == 64


def test_provider_ids_are_ignored() -> None:
    a = coerce_tool_call({"id": "call_1", "function": {"name": "f", "arguments": '{"q":1}'}})
    b = coerce_tool_call({"id": "toolu_9", "name": "f", "input": {"q": 1}})
    c = ToolCall(name="f", args={"q": 1}, id="zzz")
    assert a.identity == b.identity == c.identity
    assert a.id == "call_1" and b.id == "toolu_9"


def test_unparseable_text_is_hashed_as_text() -> None:
    assert call_identity("f", "{bad") == call_identity("f", "{bad")
    assert call_identity("f", "{bad") != call_identity("f", "{bad ")
