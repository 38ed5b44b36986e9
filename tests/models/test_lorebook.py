"""The lorebook model: lossless round trips, SillyTavern's defaults, uid allocation, key order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tavernkit.errors import FormatError, LimitExceeded
from tavernkit.models.character_book import CharacterBook
from tavernkit.models.lorebook import (
    GENERATION_TYPE_TRIGGERS,
    ExtensionPromptRole,
    Lorebook,
    LoreEntry,
    SelectiveLogic,
    WorldInfoPosition,
    add_missing_fields,
    entry_template,
    js_key_order,
)

# The order SillyTavern 1.18 writes an entry it created and saved (the conformance books).
ST_ENTRY_KEYS = [
    "uid", "key", "keysecondary", "comment", "content", "constant", "vectorized", "selective",
    "selectiveLogic", "addMemo", "order", "position", "disable", "ignoreBudget",
    "excludeRecursion", "preventRecursion", "matchPersonaDescription",
    "matchCharacterDescription", "matchCharacterPersonality", "matchCharacterDepthPrompt",
    "matchScenario", "matchCreatorNotes", "delayUntilRecursion", "probability", "useProbability",
    "depth", "outletName", "group", "groupOverride", "groupWeight", "scanDepth", "caseSensitive",
    "matchWholeWords", "useGroupScoring", "automationId", "role", "sticky", "cooldown", "delay",
    "triggers", "characterFilter", "displayIndex",
]  # fmt: skip


def _key_orders(value: Any) -> Any:
    """Every mapping's key list, recursively, so a comparison also checks key order."""
    if isinstance(value, dict):
        return [(k, _key_orders(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_key_orders(v) for v in value]
    return value


def test_defaults_are_sillytaverns_template() -> None:
    entry = LoreEntry()
    assert entry.keys == [] and entry.secondary_keys == []
    assert entry.selective is True and entry.use_probability is True
    assert (entry.order, entry.probability, entry.depth, entry.group_weight) == (100, 100, 4, 100)
    assert entry.position == WorldInfoPosition.BEFORE
    assert entry.selective_logic == SelectiveLogic.AND_ANY
    assert entry.role == ExtensionPromptRole.SYSTEM
    assert entry.delay_until_recursion == 0
    for name in ("scan_depth", "case_sensitive", "match_whole_words", "use_group_scoring"):
        assert getattr(entry, name) is None
    assert (entry.sticky, entry.cooldown, entry.delay) == (None, None, None)
    assert entry.character_filter.model_dump() == {"isExclude": False, "names": [], "tags": []}
    assert entry_template() == {
        k: v for k, v in LoreEntry.create().to_wire().items() if k in entry_template()
    }
    assert list(entry_template()) == ST_ENTRY_KEYS[1:-2]


def test_enums_match_sillytavern_values() -> None:
    assert [p.value for p in WorldInfoPosition] == list(range(8))
    assert WorldInfoPosition.AT_DEPTH == 4 and WorldInfoPosition.OUTLET == 7
    assert (SelectiveLogic.NOT_ALL, SelectiveLogic.NOT_ANY, SelectiveLogic.AND_ALL) == (1, 2, 3)
    assert ExtensionPromptRole.ASSISTANT == 2
    assert set(GENERATION_TYPE_TRIGGERS) == {
        "normal", "continue", "impersonate", "swipe", "regenerate", "quiet",
    }  # fmt: skip


def test_python_names_and_json_aliases() -> None:
    entry = LoreEntry.model_validate(
        {"key": ["a"], "keysecondary": ["b"], "selectiveLogic": 3, "matchWholeWords": True}
    )
    assert entry.keys == ["a"] and entry.secondary_keys == ["b"]
    assert entry.selective_logic == SelectiveLogic.AND_ALL and entry.match_whole_words is True
    by_name = LoreEntry(keys=["x"], use_probability=False)
    assert by_name.to_wire() == {"key": ["x"], "useProbability": False}


def test_unknown_values_and_keys_round_trip() -> None:
    raw = {
        "uid": "7",
        "position": 42,
        "role": None,
        "delayUntilRecursion": True,
        "order": 100.0,
        "probability": 37.5,
        "keys": ["a stray key spelled like the attribute"],
        "add_memo": "also stray",
        "futureField": {"nested": [1, 2]},
        "characterFilter": {"isExclude": True, "names": ["Bob"], "tags": [], "extra": 1},
    }
    # Files are read by JSON name only, so attribute-like keys stay unknown keys.
    entry = LoreEntry.model_validate(raw, by_name=False)
    assert entry.to_wire() == raw
    assert json.dumps(entry.to_wire()) == json.dumps(raw)  # ints stay ints, floats stay floats
    assert entry.delay_until_recursion is True
    assert entry.keys == [] and entry.add_memo is False
    both = {"keys": ["stray"], "key": ["real"]}
    assert LoreEntry.model_validate(both, by_name=False).to_wire() == both
    assert LoreEntry.model_validate(both, by_name=False).keys == ["real"]


def test_eldoria_round_trips_exactly(st_default_data: Path) -> None:
    raw = json.loads((st_default_data / "Eldoria.json").read_text(encoding="utf-8"))
    book = Lorebook.model_validate(raw)
    assert len(book.entries) == 4
    assert book.entries["0"].keys == ["eldoria", "wood", "forest", "magical forest"]
    assert book.entries["0"].role is None
    assert book.to_wire() == raw
    assert _key_orders(book.to_wire()) == _key_orders(raw)


def test_new_entry_is_complete_and_takes_lowest_free_uid() -> None:
    book = Lorebook()
    first = book.new_entry(keys=["dragon"], content="Dragons hoard gold.")
    assert first.uid == 0
    assert list(first.to_wire()) == ST_ENTRY_KEYS
    wire = first.to_wire()
    assert wire["characterFilter"] == {"isExclude": False, "names": [], "tags": []}
    assert wire["displayIndex"] == 0 and wire["key"] == ["dragon"]
    assert book.new_entry().uid == 1
    assert book.new_entry().uid == 2
    del book.entries["1"]
    assert book.new_entry(comment="refill").uid == 1
    assert list(book.entries) == ["0", "2", "1"]
    assert book.to_wire()["entries"]["1"]["comment"] == "refill"
    assert "extensions" not in wire


def test_new_entry_skips_string_keys_and_reports_full_book(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    book = Lorebook.model_validate({"entries": {"0": {"uid": 0}, "x": {"uid": "x"}}})
    assert book.new_entry().uid == 1
    with pytest.raises(TypeError):
        book.new_entry(uid=5)
    monkeypatch.setattr("tavernkit.models.lorebook.MAX_UID", 3)  # SillyTavern's is 1,000,000
    assert book.new_entry().uid == 2
    with pytest.raises(LimitExceeded):
        book.new_entry()


def test_entries_in_order_follows_javascript_key_order() -> None:
    raw = {"entries": {k: {"uid": k} for k in ["10", "b", "2", "01", "a", "0", "-1"]}}
    book = Lorebook.model_validate(raw)
    assert list(book.entries) == ["10", "b", "2", "01", "a", "0", "-1"]  # file order kept
    assert [e.uid for e in book.entries_in_order()] == ["0", "2", "10", "b", "01", "a", "-1"]
    assert js_key_order(["4294967295", "4294967294", "1"]) == ["1", "4294967294", "4294967295"]


def test_original_data_is_a_card_book_or_kept_raw() -> None:
    card_book = {"name": "B", "entries": [{"keys": ["k"], "content": "c", "x": 1}]}
    book = Lorebook.model_validate({"entries": {}, "originalData": card_book})
    assert isinstance(book.original_data, CharacterBook)
    assert book.to_wire()["originalData"] == card_book
    odd = {"entries": "not a list"}
    book = Lorebook.model_validate({"entries": {}, "originalData": odd})
    assert book.original_data == odd and book.to_wire()["originalData"] == odd


def test_add_missing_fields_back_fills_at_the_end() -> None:
    entry = LoreEntry.model_validate({"uid": 3, "content": "x", "order": 5, "custom": True})
    done = add_missing_fields(entry)
    keys = list(done.to_wire())
    assert keys[:4] == ["uid", "content", "order", "custom"]
    assert keys[4:] == [k for k in entry_template() if k not in {"content", "order"}] + [
        "characterFilter"
    ]
    assert done.to_wire()["characterFilter"] == {"isExclude": False, "names": [], "tags": []}
    assert done.order == 5 and done.selective is True and done.depth == 4
    assert entry.to_wire() == {"uid": 3, "content": "x", "order": 5, "custom": True}


def test_add_missing_fields_repairs_what_sillytavern_repairs() -> None:
    done = add_missing_fields(
        {"uid": 1, "key": "dragon", "keysecondary": None, "characterFilter": [1, 2]}
    )
    wire = done.to_wire()
    assert wire["key"] == [] and wire["keysecondary"] == []
    assert wire["characterFilter"] == {"isExclude": False, "names": [], "tags": []}
    kept = add_missing_fields({"uid": 1, "characterFilter": {}})
    assert kept.to_wire()["characterFilter"] == {}  # an empty object is truthy in JS: kept
    complete = LoreEntry.create(uid=0)
    assert add_missing_fields(complete).to_wire() == complete.to_wire()


def test_add_missing_fields_names_the_bad_field() -> None:
    with pytest.raises(FormatError) as info:
        add_missing_fields({"key": ["a", 5]}, source="book.json", field="entries.4")
    assert info.value.source == "book.json"
    assert info.value.field == "entries.4.key.1"


_json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8)
_json = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)
_numbers = st.integers(-1000, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
_field_values: dict[str, st.SearchStrategy[Any]] = {
    "uid": st.integers(0, 10**6),
    "key": st.lists(st.text(max_size=10), max_size=4),
    "keysecondary": st.lists(st.text(max_size=10), max_size=3),
    "comment": st.text(max_size=20),
    "content": st.text(max_size=60),
    "constant": st.booleans(),
    "selective": st.booleans(),
    "selectiveLogic": st.integers(0, 5),
    "order": _numbers,
    "position": st.integers(0, 9),
    "delayUntilRecursion": st.booleans() | st.integers(0, 5),
    "probability": st.none() | _numbers,
    "depth": st.none() | st.integers(0, 1000),
    "group": st.text(max_size=10),
    "groupWeight": st.none() | _numbers,
    "scanDepth": st.none() | st.integers(0, 1000),
    "caseSensitive": st.none() | st.booleans(),
    "role": st.none() | st.integers(0, 2),
    "sticky": st.none() | st.integers(0, 50),
    "triggers": st.lists(st.sampled_from(GENERATION_TYPE_TRIGGERS), max_size=3),
    "characterFilter": st.fixed_dictionaries(
        {"isExclude": st.booleans(), "names": st.lists(st.text(max_size=5), max_size=2)}
    ),
    "displayIndex": st.integers(0, 100),
    "extensions": st.dictionaries(st.text(max_size=6), _json, max_size=3),
    "someFutureKey": _json,
    "secondary_keys": st.lists(st.text(max_size=5), max_size=2),  # a stray, attribute-like key
}


@st.composite
def raw_entries(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.permutations(list(_field_values)))
    chosen = names[: draw(st.integers(0, len(names)))]
    return {name: draw(_field_values[name]) for name in chosen}


@given(raw=raw_entries())
def test_any_entry_round_trips_with_its_key_order(raw: dict[str, Any]) -> None:
    assert _key_orders(LoreEntry.model_validate(raw, by_name=False).to_wire()) == _key_orders(raw)


@given(entries=st.lists(raw_entries(), max_size=4), extra=_json)
def test_any_book_round_trips_with_its_key_order(entries: list[dict[str, Any]], extra: Any) -> None:
    raw = {"futureBookKey": extra, "entries": {str(i * 7 % 5): e for i, e in enumerate(entries)}}
    assert _key_orders(Lorebook.model_validate(raw, by_name=False).to_wire()) == _key_orders(raw)
