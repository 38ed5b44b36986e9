"""The column-by-column key index of a word-keyed book is the entry-by-entry one, and books it
does not cover take the entry-by-entry path."""

from __future__ import annotations

import random
from dataclasses import fields
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tavernkit.worldinfo import key_index
from tavernkit.worldinfo.compile import compile_book
from tavernkit.worldinfo.index import Book, WorldInfoEngine, order_entries
from tavernkit.worldinfo.matcher import NeedleTable
from tavernkit.worldinfo.scan import COMPAT_ST_118, scan

_WORD = st.sampled_from(["bell", "Bell", "BELL", "x_1", "dragon", "Dragon", "w42", "_"])


@st.composite
def _book(draw: st.DrawFn) -> dict[str, Any]:
    entries: dict[str, Any] = {}
    for uid in range(draw(st.integers(1, 12))):
        entries[str(uid)] = {
            "uid": uid,
            "key": draw(st.lists(_WORD, max_size=3)),
            "keysecondary": draw(st.lists(_WORD, max_size=2)),
            "content": draw(st.sampled_from(["Ding.", "@@activate\nDing.", ""])),
            "order": draw(st.integers(0, 3)),
            "constant": draw(st.booleans()),
            "disable": draw(st.sampled_from([False, False, True])),
            "scanDepth": draw(st.sampled_from([None, None, None, 2])),
            "group": draw(st.sampled_from(["", "", "g"])),
            "delayUntilRecursion": draw(st.sampled_from([0, 0, 1, 2])),
        }
    return {"entries": entries}


def _same(a: key_index.KeyIndex, b: key_index.KeyIndex) -> None:
    for f in fields(key_index.KeyIndex):
        if f.name == "table":
            assert a.table.needles == b.table.needles
            assert a.table._ids == b.table._ids
        else:
            assert getattr(a, f.name) == getattr(b, f.name), f.name


@settings(max_examples=300, deadline=None)
@given(book=_book(), case_sensitive=st.booleans())
def test_a_word_keyed_book_gets_the_entry_by_entry_index(
    book: dict[str, Any], case_sensitive: bool
) -> None:
    entries = order_entries([("global", compile_book("B", book))], 0)
    by_columns = key_index._word_keys(entries, case_sensitive, True)
    assert by_columns is not None
    by_entries = key_index._entry_keys(entries, case_sensitive, True)
    _same(by_columns, by_entries)
    _same(key_index.index_keys(entries, case_sensitive, True), by_entries)


@pytest.mark.parametrize(
    ("entry", "whole_words"),
    [
        ({"key": ["two words"]}, True),
        ({"key": ["/bell/i"]}, True),
        ({"key": ["{{char}}"]}, True),
        ({"key": [" bell"]}, True),
        ({"key": [""]}, True),
        ({"key": ["café"]}, True),
        ({"key": ["bell"], "keysecondary": ["a-b"]}, True),
        ({"key": ["bell"], "caseSensitive": True}, True),
        ({"key": ["bell"], "matchWholeWords": True}, True),
        ({"key": ["bell"]}, False),  # a substring key, not a word lookup
    ],
)
def test_other_books_take_the_entry_by_entry_path(entry: dict[str, Any], whole_words: bool) -> None:
    book = {"entries": {"0": {"uid": 0, "content": "x", **entry}}}
    entries = order_entries([("global", compile_book("B", book))], 0)
    assert key_index._word_keys(entries, False, whole_words) is None
    expected = key_index._entry_keys(entries, False, whole_words)
    expected.regex_literals = key_index._regex_literals(expected.table)
    _same(key_index.index_keys(entries, False, whole_words), expected)


def test_words_are_added_only_to_an_empty_base_table() -> None:
    table = NeedleTable()
    assert list(table.add_words(["Bell", "x"], False)) == [0, 1]
    assert table.lookup("Bell", False, True) == 0 and table.get(0).folded == "bell"
    with pytest.raises(ValueError, match="empty base table"):
        table.add_words(["y"], False)
    with pytest.raises(ValueError, match="empty base table"):
        NeedleTable(base=NeedleTable()).add_words(["y"], False)


def test_an_entry_listing_a_key_twice_is_in_its_bucket_once() -> None:
    book = {
        "entries": {
            "0": {"uid": 0, "key": ["bell", "Bell", "bell"], "content": "x"},
            "1": {"uid": 1, "key": ["bell"], "content": "y"},
        }
    }
    entries = order_entries([("global", compile_book("B", book))], 0)
    keyed = key_index.index_keys(entries, False, True)
    assert keyed.by_needle == {0: [0, 1], 1: [0]}
    assert keyed.table.needles == key_index._entry_keys(entries, False, True).table.needles


_TEXT_WORD = st.sampled_from(["bell", "Bell", "dragon", "DRAGON", "x_1", "w42", "tide", "moon"])


@st.composite
def _scan_case(draw: st.DrawFn) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    entries: dict[str, Any] = {}
    for uid in range(draw(st.integers(1, 10))):
        entries[str(uid)] = {
            "uid": uid,
            "key": draw(st.lists(_WORD, min_size=1, max_size=2)),
            "keysecondary": draw(st.lists(_WORD, max_size=2)),
            "selective": True,
            "selectiveLogic": draw(st.integers(0, 3)),
            # Words in the content: what recursion finds in the recursion buffer.
            "content": " ".join(draw(st.lists(_TEXT_WORD, max_size=3))) or "lore",
            "order": draw(st.integers(0, 3)),
            "constant": draw(st.sampled_from([False, False, False, True])),
            "delayUntilRecursion": draw(st.sampled_from([0, 0, 0, 1])),
        }
    chat = [
        " ".join(draw(st.lists(_TEXT_WORD, max_size=3))) for _ in range(draw(st.integers(0, 6)))
    ]
    scan_settings = {
        "world_info_depth": draw(st.integers(1, 3)),
        "world_info_min_activations": draw(st.sampled_from([0, 0, 3, 6])),
        "world_info_recursive": draw(st.booleans()),
        "world_info_case_sensitive": draw(st.booleans()),
        "world_info_match_whole_words": True,
        "world_info_budget": 100,
    }
    return {"entries": entries}, chat, scan_settings


@settings(max_examples=200, deadline=None)
@given(case=_scan_case())
def test_a_scan_through_the_word_index_is_the_scan_through_the_entry_index(
    case: tuple[dict[str, Any], list[str], dict[str, Any]],
) -> None:
    # Recursion (keys first seen in the recursion buffer), min activations walking back
    # through the chat, case sensitivity and secondary-key logic, both ways.
    book, chat, scan_settings = case

    def run() -> Any:
        result = scan(
            [Book("B", book)],
            chat,
            max_context=100_000,
            settings=scan_settings,
            rng=random.Random(0).random,
            engine=WorldInfoEngine(),
            compat=COMPAT_ST_118,
        )
        return result.to_st(), result.loops

    by_words = run()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(key_index, "_word_keys", lambda *_: None)
        assert run() == by_words
