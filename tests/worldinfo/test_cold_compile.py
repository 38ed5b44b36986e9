"""The cold compile's shortcuts give what the per-entry compile gives: the column-by-column
path of plain books, the whole-book JSON check, the marshal content digest, lazily read entry
fields, the compiled-book cache and the collector paused while compiling."""

from __future__ import annotations

import copy
import gc
from collections import OrderedDict
from dataclasses import fields
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tavernkit.models.lorebook import Lorebook
from tavernkit.worldinfo import compile as wi_compile
from tavernkit.worldinfo.book_cache import BookCache
from tavernkit.worldinfo.buffer import ScanBuffer
from tavernkit.worldinfo.compile import CompiledEntry, compile_book, content_digest
from tavernkit.worldinfo.gc_pause import PROMOTE_AT, gc_paused
from tavernkit.worldinfo.index import Book, WorldInfoEngine
from tavernkit.worldinfo.json_check import all_json, is_json
from tavernkit.worldinfo.matcher import NeedleTable, SegmentMatcher
from tavernkit.worldinfo.regex_keys import RegexGuard, parse_regex_key

_FIELDS = [f.name for f in fields(CompiledEntry) if f.name != "_hash"]

_ANY_FLAG = st.sampled_from([None, False, True, 0, 1, "", "yes", [], 2.5])
_KEY = st.sampled_from(["bell", "Bell", "two words", "", " ", "{{char}}", "/be(ll)?/i", "x\x01"])


@st.composite
def _entry(draw: st.DrawFn, uid: int) -> dict[str, Any]:
    """An entry that is usually plain (what a SillyTavern file holds) and sometimes not."""
    entry: dict[str, Any] = {
        "uid": draw(st.sampled_from([uid, uid, uid, str(uid), None, 10**22, True, uid % 3])),
        "key": draw(
            st.one_of(
                st.lists(_KEY, max_size=3),
                st.sampled_from([None, "bell", [1, "bell"], [None]]),
            )
        ),
        "keysecondary": draw(st.one_of(st.lists(_KEY, max_size=2), st.just(None))),
        "content": draw(
            st.sampled_from(["Ding.", "", "@@activate\nDing.", "@@dont_activate", None, 5, False])
        ),
        "order": draw(st.sampled_from([100, 0, -3, 2.5, "7", None, True, "x"])),
        "delayUntilRecursion": draw(st.sampled_from([None, False, 0, 0.0, 1, True, 2.5, "2"])),
        "group": draw(st.sampled_from(["", "", None, "a", "a, b", 3])),
        "scanDepth": draw(st.sampled_from([None, None, 0, 3, "2"])),
        "delay": draw(st.sampled_from([None, None, 0, 2])),
    }
    for name in (
        "constant",
        "disable",
        "caseSensitive",
        "matchWholeWords",
        "matchScenario",
        "matchPersonaDescription",
        "selective",
        "useProbability",
    ):
        if draw(st.booleans()):
            entry[name] = draw(_ANY_FLAG)
    if draw(st.booleans()):
        entry["characterFilter"] = {"isExclude": draw(_ANY_FLAG), "names": ["Mira"], "tags": []}
    return entry


@st.composite
def _book(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(0, 6))
    plain = draw(st.booleans())
    entries = {}
    for uid in range(n):
        if plain:
            entries[str(uid)] = {
                "uid": uid,
                "key": draw(st.lists(_KEY, max_size=3)),
                "keysecondary": draw(st.lists(_KEY, max_size=2)),
                "content": draw(st.sampled_from(["Ding.", "", "Bell rings."])),
                "order": draw(st.integers(-5, 300)),
                "constant": draw(st.booleans()),
                "disable": draw(st.booleans()),
                "caseSensitive": draw(st.sampled_from([None, True, False])),
                "matchWholeWords": draw(st.sampled_from([None, True, False])),
                "matchScenario": draw(st.sampled_from([None, True, False, 0, 1])),
                "delayUntilRecursion": draw(st.sampled_from([0, False, None, 1, True, 2])),
                "group": "",
                "scanDepth": draw(st.sampled_from([None, 2])),
            }
        else:
            entries[str(uid)] = draw(_entry(uid))
    return {"entries": entries}


def _values(book: wi_compile.CompiledBook) -> list[tuple[Any, ...]]:
    # Reading every field also reads the lazily filled ones.
    return [tuple(getattr(e, n) for n in _FIELDS) for e in book.entries]


def _per_entry(monkeypatch: pytest.MonkeyPatch, name: str, data: Any) -> wi_compile.CompiledBook:
    with monkeypatch.context() as m:
        m.setattr(wi_compile, "compile_plain", lambda *a, **k: None)
        return compile_book(name, copy.deepcopy(data))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_book())
def test_the_column_path_compiles_as_the_per_entry_path(data: dict[str, Any]) -> None:
    with pytest.MonkeyPatch.context() as mp:
        expected = _per_entry(mp, "Coast", data)
    got = compile_book("Coast", data)
    assert _values(got) == _values(expected)
    assert got.warnings == expected.warnings
    assert [e.hash for e in got.entries] == [e.hash for e in expected.entries]
    try:
        model = Lorebook.model_validate(data)
    except ValidationError:
        return  # not every odd value fits the model
    with pytest.MonkeyPatch.context() as mp:
        expected_dumped = _per_entry(mp, "Coast", model)
    dumped = compile_book("Coast", model)  # the dumped path: entries neither checked nor copied
    assert _values(dumped) == _values(expected_dumped)
    assert dumped.warnings == expected_dumped.warnings


def test_a_plain_book_takes_the_column_path(monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[bool] = []
    real = wi_compile.compile_plain

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(wi_compile, "compile_plain", spy)
    plain = {
        "entries": {
            str(i): {"uid": i, "key": ["bell"], "keysecondary": [], "content": "x"}
            for i in range(3)
        }
    }
    compile_book("Coast", plain)
    duplicated = copy.deepcopy(plain)
    duplicated["entries"]["2"]["uid"] = 1
    compiled = compile_book("Coast", duplicated)
    assert taken == [True, False]
    assert any("duplicate uid" in w for w in compiled.warnings)


def test_lazy_fields_are_read_on_first_use_and_unknown_names_still_fail() -> None:
    raw = {
        "uid": 0,
        "key": ["bell"],
        "keysecondary": [],
        "content": "x",
        "probability": 40,
        "useProbability": True,
        "triggers": ["normal"],
    }
    (entry,) = compile_book("Coast", {"entries": {"0": raw}}).entries
    assert entry.certain is False and entry.probability == 40
    assert entry.triggers == ("normal",)
    with pytest.raises(AttributeError):
        entry.not_a_field  # type: ignore[attr-defined]  # noqa: B018


_JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(max_size=3), inner, max_size=3),
        st.tuples(inner),
        st.frozensets(st.integers(), max_size=2),
        st.dictionaries(st.integers(), inner, max_size=1),
        st.builds(OrderedDict, st.dictionaries(st.text(max_size=2), inner, max_size=2)),
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=3), _JSONISH, max_size=4), max_size=4))
def test_the_whole_book_json_check_never_passes_what_an_entry_check_rejects(
    entries: list[dict[str, Any]],
) -> None:
    if all_json(entries):
        assert all(is_json(e) for e in entries)


_PURE_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda k: st.lists(
            st.fixed_dictionaries({f"f{i}": st.one_of(_PURE_JSON, _JSONISH) for i in range(k)}),
            max_size=5,
        )
    )
)
def test_the_json_check_of_same_shaped_entries_goes_field_by_field(
    entries: list[dict[str, Any]],
) -> None:
    # Entries of one size are checked field by field (a field of one type costs a pointer
    # compare per value): never passing what an entry check rejects, and passing exact JSON.
    exact = all(_exact_json(e) for e in entries)
    keep: list[list[Any]] = []
    assert all_json(entries, keep=keep) is exact
    if exact:
        again: list[list[Any]] = []
        assert all_json(copy.deepcopy(entries), keep=again) and again == keep


def _exact_json(value: Any) -> bool:
    if value.__class__ is list:
        return all(map(_exact_json, value))
    if value.__class__ is dict:
        return all(k.__class__ is str and _exact_json(v) for k, v in value.items())
    return value.__class__ in (str, int, float, bool, type(None))


def test_the_whole_book_json_check_passes_plain_json_and_deep_books_go_per_entry() -> None:
    plain = [{"key": ["a"], "n": {"x": [1, 2.5, None, True]}, "s": "t"}]
    assert all_json(plain)
    deep: Any = "leaf"
    for _ in range(62):
        deep = [deep]
    assert not all_json([{"deep": deep}])  # ``False`` means "check each entry"
    assert is_json({"deep": deep})


def test_the_content_digest_tells_values_apart_and_equal_books_together() -> None:
    def digest(value: Any) -> str:
        return content_digest("Coast", [("0", {"uid": 0, "order": value})])

    assert len({digest(1), digest(1.0), digest(True), digest("1"), digest(-0.0), digest(0.0)}) == 6
    raw = {"entries": {"0": {"uid": 0, "key": ["bell"], "content": "Ding.", "n": {"a": [1]}}}}
    assert compile_book("Coast", raw).digest == compile_book("Coast", copy.deepcopy(raw)).digest
    assert (
        compile_book("Coast", raw).digest
        == compile_book("Coast", Lorebook.model_validate(raw)).digest
    )
    assert compile_book("Coast", raw).digest != compile_book("Other", raw).digest
    # What marshal cannot write (an object, a subclass) is only ever found by identity.
    odd = {"entries": {"0": {"uid": 0, "key": ["bell"], "content": "Ding.", "x": object()}}}
    assert compile_book("Coast", odd).digest != compile_book("Coast", odd).digest


def test_the_cache_finds_an_equal_copy_and_never_a_stale_one() -> None:
    cache = BookCache(maxsize=2)
    raw = {"entries": {"0": {"uid": 0, "key": ["bell"], "content": "Ding."}}}
    first = cache.get("Coast", raw, compat=True)
    assert cache.get("Coast", copy.deepcopy(raw), compat=True) is first
    assert cache.get("Coast", raw, compat=False) is not first
    raw["entries"]["0"]["key"].append("horn")  # edited in place, then passed as a copy
    edited = cache.get("Coast", copy.deepcopy(raw), compat=True)
    assert edited is not first and edited.entries[0].keys == ("bell", "horn")
    assert first.entries[0].keys == ("bell",)
    cache.get("Other", raw, compat=True)
    assert len(cache) == 2  # bounded: the oldest went first


def test_an_index_is_found_again_only_for_the_same_compiled_books() -> None:
    engine = WorldInfoEngine()
    raw = {"entries": {"0": {"uid": 0, "key": ["bell"], "content": "Ding."}}}
    books = [Book("Coast", raw)]
    first = engine.index(books, strategy=1, case_sensitive=False, whole_words=True, compat=True)
    again = engine.index(books, strategy=1, case_sensitive=False, whole_words=True, compat=True)
    assert again is first and first.books == (engine.books.get("Coast", raw, compat=True),)
    engine.books.clear()
    rebuilt = engine.index(books, strategy=1, case_sensitive=False, whole_words=True, compat=True)
    assert rebuilt is not first


def test_the_collector_is_paused_while_compiling_and_restored_after() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("compile failed")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a caller's own choice is kept
    finally:
        gc.enable()


def test_an_indexed_needle_matches_a_view_not_scanned_yet() -> None:
    # A word-shaped regex key is indexed (its presence per message is precomputed); asking
    # about a view before the scan loop scanned its messages used to answer False.
    key = parse_regex_key("/\\ba\\b/")
    assert key is not None
    table = NeedleTable()
    nid = table.intern(key.source, False, True)
    buffer = ScanBuffer(["a"], [""] * 6, [], table, SegmentMatcher(table), RegexGuard(), print)
    assert buffer.matches(nid, buffer.view_for(1, 0, 0, False))


def test_a_book_is_hashed_only_when_a_copy_comes_to_be_compared() -> None:
    cache = BookCache()
    raw = {"entries": {"0": {"uid": 0, "key": ["bell"], "keysecondary": [], "content": "x"}}}
    first = cache.get("Coast", raw, compat=True)
    assert not first.has_digest  # nothing of that name was cached: nothing to compare with
    assert cache.get("Coast", copy.deepcopy(raw), compat=True) is first
    assert first.has_digest
    assert first.digest == content_digest("Coast", [("0", raw["entries"]["0"])])


def test_a_book_edited_in_place_before_it_was_hashed_is_never_found_by_a_copy() -> None:
    cache = BookCache()
    raw: dict[str, Any] = {
        "entries": {
            "0": {
                "uid": 0,
                "key": ["bell"],
                "keysecondary": [],
                "content": "x",
                "characterFilter": {"names": ["Mira"], "tags": []},
            }
        }
    }
    first = cache.get("Coast", raw, compat=True)
    raw["entries"]["0"]["key"].append("horn")  # nested: the compiled wire shares this list
    edited = cache.get("Coast", copy.deepcopy(raw), compat=True)
    assert edited is not first and edited.entries[0].keys == ("bell", "horn")
    raw["entries"]["0"]["characterFilter"]["names"].append("Tam")  # two levels down
    again = cache.get("Coast", copy.deepcopy(raw), compat=True)
    assert again is not edited and again.entries[0].wire["characterFilter"]["names"] == [
        "Mira",
        "Tam",
    ]


def test_what_a_big_compile_made_leaves_the_pause_in_the_oldest_generation() -> None:
    gc.collect()
    with gc_paused():
        made = [[i] for i in range(PROMOTE_AT)]
    assert gc.get_count()[0] < 100  # no young collection is owed for what was made
    assert any(o is made[0] for o in gc.get_objects(generation=2))
    assert gc.get_freeze_count() == 0
    # A pause that made little (a scan finding its index cached) leaves the collector be.
    with gc_paused():
        small = [[i] for i in range(100)]
    assert gc.get_count()[0] >= 100
    assert not any(o is small[0] for o in gc.get_objects(generation=2))
    gc.freeze()  # a process that froze objects of its own keeps them frozen
    try:
        frozen = gc.get_freeze_count()
        with gc_paused():
            [[i] for i in range(PROMOTE_AT)]
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
