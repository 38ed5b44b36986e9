"""Variable semantics (SillyTavern's ``variables.js``) and the JS value helpers."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from tavernkit.jscompat import js_number_to_string, js_to_number
from tavernkit.text.variables import InMemoryVariables, ReadOnlyVariables, VariableStore


def test_protocol() -> None:
    assert isinstance(InMemoryVariables(), VariableStore)
    assert isinstance(ReadOnlyVariables(InMemoryVariables()), VariableStore)


def test_get_reads_numbers_and_keeps_text() -> None:
    v = InMemoryVariables({"n": "007", "s": "abc", "blank": "   ", "e": ""})
    assert v.get("n") == 7
    assert v.get("s") == "abc"
    assert v.get("blank") == "   "
    assert v.get("e") == ""
    assert v.get("missing") == ""


def test_add_numbers_strings_and_arrays() -> None:
    v = InMemoryVariables({"n": "2", "s": "ab", "arr": "[1,2]"})
    assert v.add("n", "1.5") == 3.5
    assert v.add("s", "5") == "ab5"
    assert v.add("arr", "3") == '[1,2,"3"]'
    assert v.add("new", "4") == 4
    assert v.inc("fresh") == 1
    assert v.dec("fresh") == 0
    assert v.local_vars == {"n": 3.5, "s": "ab5", "arr": '[1,2,"3"]', "new": 4, "fresh": 0}


def test_scopes_and_metadata_round_trip() -> None:
    v = InMemoryVariables()
    v.set("x", "1")
    v.set("x", "g", "global")
    assert (v.get("x"), v.get("x", "global")) == (1, "g")
    assert v.has("x") and not v.has("y")
    v.delete("x")
    assert not v.has("x") and v.has("x", "global")
    other = InMemoryVariables()
    v.set("k", "v")
    other.load_local({"variables": v.export_local()})
    assert other.export_local() == {"k": "v"}


@given(st.integers(-(10**9), 10**9), st.integers(-(10**9), 10**9))
def test_numeric_add_is_exact(a: int, b: int) -> None:
    v = InMemoryVariables({"x": str(a)})
    v.add("x", str(b))
    assert v.local_vars["x"] == a + b


def test_js_number_formatting_and_parsing() -> None:
    assert js_number_to_string(3.0) == "3"
    assert js_number_to_string(0.1 + 0.2) == "0.30000000000000004"
    assert js_number_to_string(1e-7) == "1e-7"
    assert js_number_to_string(0.00001) == "0.00001"
    assert js_number_to_string(1e21) == "1e+21"
    assert js_to_number(" 0x1F ") == 31
    assert js_to_number("") == 0
    assert math.isnan(js_to_number("1_000"))
    assert math.isnan(js_to_number("inf"))
    assert js_to_number("-Infinity") == -math.inf
