"""The fast paths of the world-info engine give exactly the slow paths' answers.

Word-shaped regex keys (``/\\bdragons?\\b/i``) are matched through the word index instead of
the regex engine; inclusion groups drop losers from a set instead of ``list.remove``. These
tests hold each fast path against its reference: ``regress`` (the ECMAScript engine) for the
regex keys, a plain re-statement of SillyTavern's loop for the groups.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from typing import Any

import regress
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavernkit.worldinfo import Book, RegexGuard, WorldInfoEngine, compile_book, scan
from tavernkit.worldinfo.buffer import ScanBuffer
from tavernkit.worldinfo.groups import GroupRules, filter_by_inclusion_groups
from tavernkit.worldinfo.matcher import KIND_REGEX, KIND_RXWORD, NeedleTable, SegmentMatcher
from tavernkit.worldinfo.regex_keys import (
    RegexKey,
    is_segment_local,
    parse_regex_key,
    word_alternatives,
)


def entry(uid: int, keys: list[str], content: str, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "uid": uid,
        "key": keys,
        "keysecondary": [],
        "content": content,
        "selective": True,
        "selectiveLogic": 0,
        "order": 100,
        "position": 0,
        "probability": 100,
        "useProbability": True,
        "group": "",
    }
    base.update(extra)
    return base


def book(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"entries": {str(e["uid"]): e for e in entries}}


class CountingGuard(RegexGuard):
    """A guard that counts how often the regex engine really runs."""

    def __init__(self) -> None:
        super().__init__()
        self.patterns: list[str] = []

    def test(self, key: RegexKey, haystack: str) -> bool | None:
        self.patterns.append(key.pattern)
        return super().test(key, haystack)


# --- word-shaped regex keys ------------------------------------------------------------------


def test_word_alternatives_accepts_only_whole_word_shapes() -> None:
    assert word_alternatives(r"\bw123(?:s|es)?\b", "i") == frozenset({"w123", "w123s", "w123es"})
    assert word_alternatives(r"\bDragon\b", "") == frozenset({"Dragon"})
    assert word_alternatives(r"\bDragon\b", "gi") == frozenset({"dragon"})
    assert word_alternatives(r"\b(?:elf|elves)\b", "") == frozenset({"elf", "elves"})
    assert word_alternatives(r"\bFo(o|x)(?:d)??\b", "") == frozenset({"Foo", "Food", "Fox", "Foxd"})
    assert word_alternatives(r"\bfoo\b", "u") == frozenset({"foo"})
    # \b binds to the first and last alternative only.
    assert word_alternatives(r"\bfoo|bar\b", "") is None
    # iu folds U+017F to s and U+212A to k; y anchors at index 0.
    assert word_alternatives(r"\bkiss\b", "iu") is None
    assert word_alternatives(r"\bfoo\b", "y") is None
    for pattern in (
        r"\b(?:foo)?\b",  # the empty word: \b\b matches at any boundary
        r"\bfo+\b",
        r"\bf.o\b",
        r"\b(?=f)foo\b",
        r"\bfoo\\b",
        r"\bf[o]o\b",
        r"\bfoo\B",
        r"foo",
        r"\bé\b",
    ):
        assert word_alternatives(pattern, "") is None, pattern


def test_word_alternatives_are_capped() -> None:
    many = r"\b" + "(?:a|b)" * 9 + r"\b"  # 512 words
    assert word_alternatives(many, "") is None
    assert word_alternatives(r"\b" + "(?:a|b)" * 8 + r"\b", "") is not None


def _matcher_hit(key: str, text: str) -> bool:
    table = NeedleTable()
    nid = table.intern(key, False, True)
    return nid in SegmentMatcher(table).match(text)


def _regress_hit(pattern: str, flags: str, text: str) -> bool:
    return (
        regress.Regex(pattern, "".join(f for f in flags if f in "imsu") or None).find(text)
        is not None
    )


def _js_hit(pattern: str, flags: str, text: str) -> bool:
    # JS without the u flag: ASCII \w / \b, and /i canonicalises by toUpperCase, never mapping
    # a non-ASCII character to ASCII (so U+017F is not "s" and U+212A not "k"). Python's re
    # with ASCII | IGNORECASE states exactly that for these patterns. regress folds U+017F and
    # U+212A even without u, so it is only the oracle for texts without them.
    re_flags = re.ASCII | (re.IGNORECASE if "i" in flags else 0)
    return re.search(pattern, text, re_flags) is not None


# Characters where a naive lowercasing or Unicode \w would disagree with JS: Kelvin sign and
# long s (fold to ASCII under iu), dotted capital I (lowercases to "i" + U+0307), accented
# letters (not word characters), the scan text's own joiners.
_ALPHABET = "aAbBkKsS_1 \u212a\u017f\u0130\u00e9\x01\n-"
_REGRESS_ALPHABET = "aAbBkKsS_1 \u0130\u00e9\x01\n-"
_WORD_ATOMS = ["a", "A", "b", "k", "s", "_", "1", "ab", "ks"]


@st.composite
def word_patterns(draw: st.DrawFn) -> str:
    def seq(depth: int) -> str:
        out = []
        for _ in range(draw(st.integers(1, 3))):
            if depth < 2 and draw(st.booleans()):
                alts = [seq(depth + 1) for _ in range(draw(st.integers(1, 3)))]
                atom = ("(?:" if draw(st.booleans()) else "(") + "|".join(alts) + ")"
            else:
                atom = draw(st.sampled_from(_WORD_ATOMS))
            if draw(st.integers(0, 3)) == 0:
                atom = f"(?:{atom})?"
            out.append(atom)
        return "".join(out)

    return r"\b" + seq(0) + r"\b"


@settings(max_examples=120, deadline=None)
@given(word_patterns(), st.sampled_from(["", "i", "g", "gi", "im", "s", "u"]), st.data())
def test_word_shaped_regex_matches_like_the_regex_engine(
    pattern: str, flags: str, data: st.DataObject
) -> None:
    words = word_alternatives(pattern, flags)
    key = f"/{pattern}/{flags}"
    table = NeedleTable()
    needle = table.get(table.intern(key, False, True))
    assert needle.kind == (KIND_RXWORD if words else KIND_REGEX)
    if not words:
        return
    for _ in range(5):
        text = data.draw(st.text(alphabet=_ALPHABET, max_size=14))
        assert _matcher_hit(key, text) == _js_hit(pattern, flags, text), (key, text)
        text = data.draw(st.text(alphabet=_REGRESS_ALPHABET, max_size=14))
        assert _matcher_hit(key, text) == _regress_hit(pattern, flags, text), (key, text)


def test_word_shaped_regex_edge_characters() -> None:
    # Kelvin sign / long s are not k / s without the u flag (JS Canonicalize); "İ" is no
    # word character.
    assert not _matcher_hit(r"/\bks\b/i", "\u212a\u017f")
    assert not _js_hit(r"\bks\b", "i", "\u212a\u017f")
    assert _matcher_hit(r"/\bks\b/i", "KS-\u0130")
    assert not _matcher_hit(r"/\bi\b/i", "\u0130stanbul")  # toLowerCase would give "i̇"
    assert _matcher_hit(r"/\bstanbul\b/i", "\u0130stanbul")
    assert not _matcher_hit(r"/\bdragon\b/", "Dragon")
    assert _matcher_hit(r"/\bdragons?\b/i", "DRAGONS!")
    assert not _matcher_hit(r"/\bdragons?\b/i", "dragonfly")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    word_patterns(),
    st.sampled_from(["", "i"]),
    st.lists(st.text(alphabet=_REGRESS_ALPHABET, max_size=10), min_size=1, max_size=4),
    st.text(alphabet=_REGRESS_ALPHABET, max_size=10),
)
def test_word_needle_scan_equals_the_regex_engine_scan(
    pattern: str, flags: str, chat: list[str], content: str
) -> None:
    # The same key twice: once static (indexed word needle), once behind a macro (per-scan
    # needle, run through regress). Recursion puts the first entry's content in play.
    key = f"/{pattern}/{flags}"
    entries = [
        entry(0, ["a", "b", "k", "s"], content + " a"),
        entry(1, [key], "static"),
        entry(2, ["{{key}}"], "dynamic"),
    ]

    def substitute(text: str) -> str:
        return text.replace("{{key}}", key)

    result = scan(
        [Book("W", book(*entries))],
        chat,
        max_context=100_000,
        settings={"world_info_recursive": True, "world_info_depth": 2},
        substitute=substitute,
        rng=random.Random(0).random,
        engine=WorldInfoEngine(),
    )
    keys = result.activated_keys
    assert ("W.1" in keys) == ("W.2" in keys), (key, chat, content, keys)


def test_word_shaped_regex_keys_never_run_the_regex_engine() -> None:
    engine = WorldInfoEngine()
    guard = CountingGuard()
    engine.guard = guard
    entries = [
        entry(0, [r"/\bdragons?\b/i"], "D"),
        entry(1, [r"/\b(?:elf|elves)\b/"], "E"),
        entry(2, [r"/drag(on)+/i"], "R"),
    ]
    result = scan(
        [Book("B", book(*entries))],
        ["A DRAGON and two elves", "dragonfly Elves"],
        max_context=8000,
        rng=random.Random(0).random,
        engine=engine,
    )
    assert result.activated_keys == ["B.0", "B.1", "B.2"]
    assert set(guard.patterns) == {"drag(on)+"}  # only the general pattern ran


def test_keys_differing_only_in_case_all_match() -> None:
    # Two needles fold to the same word: both must be found.
    entries = [entry(0, ["Dragon"], "A"), entry(1, ["dragon"], "B"), entry(2, ["DRAGON"], "C")]
    result = scan(
        [Book("C", book(*entries))],
        ["a dragon"],
        max_context=8000,
        rng=random.Random(0).random,
        engine=WorldInfoEngine(),
    )
    assert result.activated_keys == ["C.0", "C.1", "C.2"]


# --- inclusion groups ------------------------------------------------------------------------


def reference_groups(
    new_entries: list[int],
    entries: Sequence[Any],
    activated: Sequence[Any],
    *,
    is_sticky: Callable[[int], bool],
    score: Callable[[int], int],
    global_scoring: bool,
    rng: Callable[[], float],
    compat: bool,
) -> None:
    """SillyTavern's filterByInclusionGroups restated with ``list.remove`` (no cooldown or
    delay: those only add removals of the same kind)."""
    grouped: dict[str, list[int]] = {}
    for idx in new_entries:
        for name in entries[idx].group_names:
            grouped.setdefault(name, []).append(idx)

    def remove(idx: int) -> None:
        if idx in new_entries:
            new_entries.remove(idx)
        elif compat and new_entries:
            new_entries.pop()

    has_sticky = {}
    for name, group in grouped.items():
        stickies = [i for i in group if is_sticky(i)]
        has_sticky[name] = bool(stickies)
        for i in group:
            if stickies and i not in stickies:
                remove(i)
    for name, group in grouped.items():
        if has_sticky[name] or not (
            global_scoring or any(entries[i].use_group_scoring for i in group)
        ):
            continue
        best = max(score(i) for i in group)
        for i in list(group):
            flag = entries[i].use_group_scoring
            if (global_scoring if flag is None else flag) and score(i) < best:
                remove(i)
                group.remove(i)
    taken = (
        {e.group for e in activated} if compat else {g for e in activated for g in e.group_names}
    )
    for name, group in grouped.items():
        if has_sticky[name]:
            continue
        if name in taken:
            for i in group:
                remove(i)
            continue
        if len(group) <= 1:
            continue
        prios = sorted(
            (i for i in group if entries[i].group_override), key=lambda i: -entries[i].order
        )
        if prios:
            winner = prios[0]
        else:
            weights = [entries[i].group_weight for i in group]
            roll = rng() * sum(weights)
            acc, winner = 0.0, -1
            for i, w in zip(group, weights, strict=True):
                acc += w
                if roll <= acc:
                    winner = i
                    break
            if winner == -1:
                continue
        for i in group:
            if i != winner:
                remove(i)


@settings(max_examples=80, deadline=None)
@given(st.data(), st.booleans(), st.booleans())
def test_group_filter_equals_the_list_remove_reference(
    data: st.DataObject, compat: bool, global_scoring: bool
) -> None:
    n = data.draw(st.integers(1, 14))
    raw = [
        entry(
            uid,
            ["k"],
            f"c{uid}",
            group=data.draw(st.sampled_from(["", "a", "b", "a,b", "b,c", "c"])),
            groupWeight=data.draw(st.sampled_from([1, 50, 100])),
            groupOverride=data.draw(st.booleans()),
            order=data.draw(st.integers(0, 3)),
            useGroupScoring=data.draw(st.sampled_from([None, True, False])),
        )
        for uid in range(n)
    ]
    compiled = compile_book("G", book(*raw)).entries
    new = sorted(data.draw(st.sets(st.integers(0, n - 1), min_size=1)))
    earlier = [compiled[i] for i in range(n) if i not in new and data.draw(st.booleans())]
    sticky = set(data.draw(st.sets(st.sampled_from(new), max_size=2)))
    scores = {i: data.draw(st.integers(0, 2)) for i in new}
    rolls = [data.draw(st.floats(0, 0.999)) for _ in range(8)]

    fast = list(new)
    fast_rolls = iter(rolls)
    filter_by_inclusion_groups(
        fast,
        compiled,
        earlier,
        GroupRules(
            is_sticky=sticky.__contains__,
            is_cooldown=lambda i: False,
            is_delay=lambda i: False,
            score=scores.__getitem__,
            global_scoring=global_scoring,
            rng=fast_rolls.__next__,
            compat=compat,
        ),
    )
    slow = list(new)
    slow_rolls = iter(rolls)
    reference_groups(
        slow,
        compiled,
        earlier,
        is_sticky=sticky.__contains__,
        score=scores.__getitem__,
        global_scoring=global_scoring,
        rng=slow_rolls.__next__,
        compat=compat,
    )
    assert fast == slow


# --- segment-local regex keys ------------------------------------------------------------------


def test_segment_local_shapes() -> None:
    for pattern in (r"drag(on)+", r"\bfoo\b", r"foo[a-z]+", r"[ -~]+", r"\d{2,}", r"a|b\B"):
        assert is_segment_local(pattern), pattern
    for pattern in (
        r"a.b",  # . matches \x01
        r"^foo",
        r"foo$",
        r"foo\s+bar",  # \s matches \n
        r"[^a]",
        r"(?=a)b",
        r"(?<=a)b",
        r"(a)\1",
        r"\1",  # legacy octal \x01 without groups
        r"[\s]",
        r"[\t-z]",  # a range over \n
        r"[\x00-z]",
        r"[]|^a]",  # JS's empty class, then an anchored alternative
        r"x\W",
    ):
        assert not is_segment_local(pattern), pattern
    local = parse_regex_key("/drag(on)+/i")
    assert local is not None and local.local
    matches_empty = parse_regex_key("/a*/")
    assert matches_empty is not None and not matches_empty.local


_LOCAL_PIECES = ["a", "b", "ab", r"\b", r"\B", "[ab]", r"\d", r"\w", "(?:a|b)", "-", " ", "[a-c]"]
_QUANTS = ["", "", "+", "?", "*", "{2}"]
_SEGMENT_ALPHABET = "ab c1-\n\x01_"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.sampled_from(_LOCAL_PIECES), st.sampled_from(_QUANTS)), max_size=4),
    st.sampled_from(["", "i"]),
    st.lists(st.text(alphabet=_SEGMENT_ALPHABET, max_size=8), max_size=5),
    st.lists(st.text(alphabet=_SEGMENT_ALPHABET, max_size=8), max_size=2),
    st.lists(st.text(alphabet=_SEGMENT_ALPHABET, min_size=1, max_size=8), max_size=3),
    st.data(),
)
def test_segment_local_regex_equals_the_joined_text_search(
    pieces: list[tuple[str, str]],
    flags: str,
    messages: list[str],
    fields: list[str],
    chunks: list[str],
    data: st.DataObject,
) -> None:
    pattern = "".join(p if not q or p.startswith(("\\b", "\\B")) else p + q for p, q in pieces)
    key = parse_regex_key(f"/{pattern}/{flags}")
    if key is None or not key.local:
        return
    table = NeedleTable()
    nid = table.intern(key.source, False, True)
    guard = RegexGuard()
    buffer = ScanBuffer(
        messages,
        fields + [""] * (6 - len(fields)),
        [],
        table,
        SegmentMatcher(table),
        guard,
        lambda _: None,
    )
    chunks = list(chunks)
    for _ in range(4):
        view = buffer.view_for(
            data.draw(st.integers(0, 6)),
            0,
            data.draw(st.integers(0, 3)),
            data.draw(st.booleans()),
        )
        expected = regress.Regex(pattern, flags or None).find(buffer.text(view)) is not None
        assert buffer.matches(nid, view) == expected, (pattern, view, buffer.text(view))
        if chunks:
            buffer.add_recursion(chunks.pop(0))
