"""Unit and property tests of the world-info engine (the goldens are in test_wi_goldens.py)."""

from __future__ import annotations

import copy
import random
import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavernkit.worldinfo import (
    Book,
    RegexGuard,
    WorldInfoEngine,
    cyrb53,
    is_risky_pattern,
    js_json_stringify,
    merge_authors_note,
    parse_decorators,
    parse_regex_key,
    scan,
    scan_chat,
)

ENGINE = WorldInfoEngine(regex_timeout_s=0.5)


def entry(uid: int, keys: list[str], content: str, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "uid": uid,
        "key": keys,
        "keysecondary": [],
        "content": content,
        "constant": False,
        "selective": True,
        "selectiveLogic": 0,
        "order": 100,
        "position": 0,
        "disable": False,
        "probability": 100,
        "useProbability": True,
        "group": "",
    }
    base.update(extra)
    return base


def book(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"entries": {str(e["uid"]): e for e in entries}}


def run(books: list[Book], chat: list[str], **kw: Any) -> Any:
    kw.setdefault("max_context", 8000)
    kw.setdefault("rng", random.Random(1).random)
    return scan(books, chat, engine=ENGINE, **kw)


# --- JS emulation ----------------------------------------------------------------------------


def test_cyrb53_and_stringify_match_javascript() -> None:
    assert cyrb53("") == 3338908027751811
    assert js_json_stringify(
        {"b": 1, "a": [1.0, 0.1, 1e21, 1e-7, None, "é\n"], "2": True, "1": 0}
    ) == ('{"1":0,"2":true,"b":1,"a":[1,0.1,1e+21,1e-7,null,"é\\n"]}')
    assert js_json_stringify(123456789012.5) == "123456789012.5"


def test_decorators() -> None:
    assert parse_decorators("@@activate\nbody") == (["@@activate"], "body")
    assert parse_decorators("@@unknown\n@@@activate\nx") == (["@@activate"], "x")
    assert parse_decorators("@@@activate\nx") == ([], "x")
    assert parse_decorators("@@activate") == (["@@activate"], "@@activate")
    assert parse_decorators("@@activate", compat=False) == (["@@activate"], "")
    assert parse_decorators("plain") == ([], "plain")


def test_regex_key_parsing() -> None:
    key = parse_regex_key("/drag(on|oon)/i")
    assert key is not None and key.flags == "i" and not key.risky
    assert parse_regex_key("/a/b/") is None  # unescaped slash: a plain key
    assert parse_regex_key("/a/gg") is None  # repeated flag: RegExp throws
    assert parse_regex_key("/a(/") is None  # syntax error
    assert parse_regex_key("/a\\/b/").pattern == "a/b"  # type: ignore[union-attr]
    assert parse_regex_key("dragon") is None
    assert is_risky_pattern("(a+)+$") and is_risky_pattern("(x|x)*y") and is_risky_pattern("(a)\\1")
    assert not is_risky_pattern("dragon\\d+") and not is_risky_pattern("[(+]+")


def test_catastrophic_regex_is_cut_off_with_a_warning() -> None:
    guard = RegexGuard(timeout_s=0.5)
    key = parse_regex_key("/(a+)+$/")
    assert key is not None and key.risky
    start = time.monotonic()
    assert guard.test(key, "a" * 40 + "b") is None
    assert guard.test(key, "a" * 40 + "b") is None  # remembered: no second wait
    assert time.monotonic() - start < 5
    ok = parse_regex_key("/^(a+)+$/")
    assert ok is not None and guard.test(ok, "aaa") is True
    guard.close()

    books = [Book("B", book(entry(0, ["/(a+)+$/"], "slow"), entry(1, ["aaa"], "fine")))]
    start = time.monotonic()
    result = run(books, ["a" * 40 + "b aaa"])
    assert time.monotonic() - start < 10
    assert result.activated_keys == ["B.1"]
    assert any("B.0" in w and "time" in w for w in result.warnings)


# --- matching --------------------------------------------------------------------------------


def test_whole_words_case_and_regex() -> None:
    books = [
        Book(
            "B",
            book(
                entry(0, ["hero"], "plain"),
                entry(1, ["héro"], "accent"),
                entry(2, ["Dragon"], "cs", caseSensitive=True),
                entry(3, ["/^\\x01User: h/"], "anchored"),
                entry(4, ["red dragon"], "multi"),
                entry(5, ["ero"], "partial"),
            ),
        )
    ]
    result = run(books, ["User: héro meets a red dragon"])
    assert set(result.activated_keys) == {"B.1", "B.3", "B.4"}


def test_scan_chat_builds_newest_first() -> None:
    msgs = [
        {"name": "A", "mes": "hi {{char}}", "is_system": False},
        {"name": "S", "mes": "sys", "is_system": True},
        {"name": "B", "mes": "yo", "is_system": False},
    ]
    assert scan_chat(msgs, substitute=lambda t: t.replace("{{char}}", "C")) == ["B: yo", "A: hi C"]
    assert scan_chat(msgs, include_names=False, trigger="swipe") == ["hi {{char}}"]


def test_authors_note_merge() -> None:
    assert merge_authors_note(["top"], "AN", ["bottom"]) == "top\nAN\nbottom"
    assert merge_authors_note([], "", []) == "\n"[:0] + ""


# --- bad books -------------------------------------------------------------------------------


def test_bad_books_skip_entries_with_named_warnings() -> None:
    bad = {
        "entries": {
            "0": entry(0, ["dragon"], "good"),
            "1": "not an object",
            "2": entry(2, ["dragon"], 42),
            "3": entry(3, "dragon", "keys not a list"),
            "4": entry(4, ["dragon", 7, None], "odd keys"),
            "5": entry(5, ["x" * 20_000], "absurd key"),
            "6": entry(0, ["dragon"], "duplicate uid"),
        }
    }
    result = run([Book("Bad", bad), Book("NoEntries", {"name": "x"}), Book("Junk", 12)], ["dragon"])
    text = "\n".join(result.warnings)
    for label in ("Bad.1", "Bad.2", "Bad.5", "Bad.6", "NoEntries", "Junk"):
        assert label in text
    assert result.activated_keys == ["Bad.0", "Bad.4"]


def test_lorebook_like_models_are_accepted() -> None:
    class Model:
        def __init__(self, data: dict[str, Any]) -> None:
            self.data = data

        def to_wire(self) -> dict[str, Any]:
            return copy.deepcopy(self.data)

    result = run([Book("M", Model(book(entry(0, ["dragon"], "yes"))))], ["a dragon"])
    assert result.before == "yes"


# --- compat differences ----------------------------------------------------------------------


def test_group_splice_bug_only_in_compat() -> None:
    # X is in groups g1 and g2; g1's roll removes X, then g2 (picking Y) removes X again:
    # SillyTavern's splice(-1) then deletes the last new entry (Z).
    entries = [
        entry(0, ["k"], "W", group="g1", groupWeight=100, order=50),
        entry(1, ["k"], "X", group="g1,g2", groupWeight=1, order=40),
        entry(2, ["k"], "Y", group="g2", groupWeight=100, order=30),
        entry(3, ["k"], "Z", order=10),
    ]
    books = [Book("G", book(*entries))]
    rolls = [0.1, 0.1]
    compat = run(books, ["k"], rng=iter(rolls).__next__, compat="st-1.18")
    fixed = run(books, ["k"], rng=iter(rolls).__next__)
    assert compat.activated_keys == ["G.0", "G.2"]
    assert fixed.activated_keys == ["G.0", "G.2", "G.3"]


# --- properties ------------------------------------------------------------------------------

WORDS = ["dragon", "sword", "elf", "river", "tower", "moon", "Ash", "ring"]


@st.composite
def books_and_chat(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[str]]:
    n = draw(st.integers(1, 12))
    entries = []
    for uid in range(n):
        entries.append(
            entry(
                uid,
                draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)),
                draw(st.sampled_from(WORDS)) + f" lore {uid}",
                order=draw(st.integers(0, 5)) * 10,
                probability=draw(st.sampled_from([100, 50, 10])),
                group=draw(st.sampled_from(["", "", "g", "h", "g,h"])),
                sticky=draw(st.sampled_from([None, 0, 2])),
                cooldown=draw(st.sampled_from([None, 1])),
                position=draw(st.integers(0, 7)),
                outletName="o",
            )
        )
    chat = draw(
        st.lists(st.lists(st.sampled_from(WORDS), max_size=4).map(" ".join), min_size=1, max_size=5)
    )
    return entries, chat


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(books_and_chat(), st.integers(0, 2**32 - 1), st.sampled_from(["default", "st-1.18"]))
def test_same_inputs_and_rng_give_the_same_result(data: Any, seed: int, compat: str) -> None:
    entries, chat = data
    books = [Book("P", book(*entries))]
    first = run(books, chat, rng=random.Random(seed).random, compat=compat)
    second = scan(
        books,
        chat,
        max_context=8000,
        rng=random.Random(seed).random,
        compat=compat,
        engine=WorldInfoEngine(),
    )
    assert first.to_st() == second.to_st()
    assert first.timed_state == second.timed_state


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(books_and_chat(), books_and_chat())
def test_unrelated_books_do_not_depend_on_order(a: Any, b: Any) -> None:
    # Book B's keys are upper-cased copies with a suffix, so no key or content of one book can
    # touch the other; no probability, groups or budget pressure couple them.
    def plain(entries: list[dict[str, Any]], tag: str) -> dict[str, Any]:
        out = []
        for e in entries:
            e = dict(e, probability=100, group="", sticky=None, cooldown=None)
            e["key"] = [k + tag for k in e["key"]]
            e["content"] = e["content"].replace(" ", tag + " ")
            out.append(e)
        return book(*out)

    chat = [
        " ".join(w + "qa" for w in m.split()) + " " + " ".join(w + "qb" for w in m.split())
        for m in a[1]
    ]
    book_a, book_b = Book("A", plain(a[0], "qa")), Book("B", plain(b[0], "qb"))
    settings_ = {"world_info_character_strategy": 0, "world_info_budget": 100}
    ab = run([book_a, book_b], chat, settings=settings_)
    ba = run([book_b, book_a], chat, settings=settings_)
    assert set(ab.activated_keys) == set(ba.activated_keys)
    assert sorted(ab.before.split("\n")) == sorted(ba.before.split("\n"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(books_and_chat(), st.integers(0, 2**32 - 1))
def test_dry_runs_change_no_state(data: Any, seed: int) -> None:
    entries, chat = data
    books = [Book("D", book(*entries))]
    state = run(books, chat, rng=random.Random(seed).random).timed_state
    frozen = copy.deepcopy(state)
    dry = run(
        books, [*chat, "dragon"], rng=random.Random(seed).random, timed_state=state, dry_run=True
    )
    assert dry.timed_state == frozen
    assert state == frozen  # the caller's state is never mutated
    real = run(books, [*chat, "dragon"], rng=random.Random(seed).random, timed_state=state)
    assert state == frozen
    assert isinstance(real.timed_state, dict)
