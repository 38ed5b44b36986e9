"""The keys of a scan index: which needle each entry's keys are, and which entries each needle
can activate (so a scan visits only the entries whose needles are in view).

The common book (every key one ASCII word, ``[A-Za-z0-9_]+``, matched as whole words, with the
case and whole-word flags left to the global settings) is indexed column by column: its words
are interned in one go and each entry's slots are dictionary lookups, with no per-key
classification. Any other book is indexed entry by entry. Both give the same index; the first
is what makes a big book's first scan cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from operator import attrgetter, countOf

from tavernkit.jscompat import js_trim
from tavernkit.worldinfo.entry import CompiledEntry
from tavernkit.worldinfo.matcher import INDEXED_KINDS, KIND_REGEX, NeedleTable, is_word

__all__ = ["KeyIndex", "KeySlot", "has_macro", "index_keys"]

#: A key slot: the needle id of a static key, ``-1`` for an empty key (never matches), or
#: ``None`` for a key that must be macro-substituted per scan.
KeySlot = tuple[str, int | None]

_KEYS = attrgetter("keys")
_SECONDARY = attrgetter("secondary")
_CASE = attrgetter("case_sensitive")
_WHOLE = attrgetter("match_whole_words")
_GROUPS = attrgetter("group_names")
_DELAY = attrgetter("delay_until_recursion")
#: What keeps an entry out of the needle buckets: it is disabled, or checked every loop.
_UNBUCKETED = attrgetter("disable", "constant", "decorators", "scan_depth")
_PLAIN = (False, False, (), None)  # enabled, not constant, no decorators, the global depth


def has_macro(text: str) -> bool:
    """Whether SillyTavern's ``substituteParams`` could change ``text`` (``{{...}}`` macros or
    the legacy ``<USER>``-style tags)."""
    return "{{" in text or "<" in text


@dataclass(slots=True, eq=False)
class KeyIndex:
    """Per entry (in scan order): its key slots, its needles for group scoring (only entries
    in a group), its effective case and whole-word flags; per needle, the entries it can
    activate (ascending); the entries checked in every loop; the delayed-recursion levels."""

    table: NeedleTable
    primary: list[tuple[KeySlot, ...]]
    secondary: list[tuple[KeySlot, ...]]
    score_primary: list[tuple[int, ...]]
    score_secondary: list[tuple[int, ...]]
    case_sensitive: list[bool]
    whole_words: list[bool]
    by_needle: dict[int, list[int]]
    always: list[int]
    delay_levels: list[float]
    #: Regex needle -> the plain needle of a literal every match contains (the pre-filter).
    regex_literals: dict[int, int] = field(default_factory=dict)


def index_keys(
    entries: Sequence[CompiledEntry], case_sensitive: bool, whole_words: bool
) -> KeyIndex:
    """The key index of ``entries`` (sorted as scanned) under the global flags."""
    keyed = _word_keys(entries, case_sensitive, whole_words)
    if keyed is None:
        keyed = _entry_keys(entries, case_sensitive, whole_words)
    keyed.regex_literals = _regex_literals(keyed.table)
    return keyed


def _word_keys(
    entries: Sequence[CompiledEntry], case_sensitive: bool, whole_words: bool
) -> KeyIndex | None:
    """The index of a book whose every key is one ASCII word matched as a whole word with the
    global case flag, column by column; ``None`` for any other book."""
    n = len(entries)
    if not n or not whole_words:
        return None
    if countOf(map(_CASE, entries), None) != n or countOf(map(_WHOLE, entries), None) != n:
        return None  # an entry sets its own flags
    keys = list(map(_KEYS, entries))
    secondary = list(map(_SECONDARY, entries))
    # Distinct keys in order of first use (primary then secondary, entry by entry): the ids
    # the entry-by-entry path would give them.
    words = list(
        dict.fromkeys(chain.from_iterable(chain.from_iterable(zip(keys, secondary, strict=True))))
    )
    if not all(map(is_word, words)):
        return None  # a phrase, a regex, a macro, white space, an empty key...
    table = NeedleTable()
    ids = table.add_words(words, case_sensitive)
    slot = dict(zip(words, zip(words, ids, strict=True), strict=True)).__getitem__
    primary = [tuple(map(slot, k)) for k in keys]
    secondary_slots = [tuple(map(slot, k)) if k else () for k in secondary]
    nid = dict(zip(words, ids, strict=True)).__getitem__
    score_p: list[tuple[int, ...]] = [()] * n
    score_s: list[tuple[int, ...]] = [()] * n
    for i in compress(range(n), map(_GROUPS, entries)):
        score_p[i] = tuple(map(nid, keys[i]))
        score_s[i] = tuple(map(nid, secondary[i]))
    bucketed: list[int] = []
    always: list[int] = []
    if countOf(map(_UNBUCKETED, entries), _PLAIN) == n:  # the common book: all in buckets
        bucketed = list(range(n))
    else:
        for i, (disable, constant, decorators, depth) in enumerate(map(_UNBUCKETED, entries)):
            if disable:
                continue
            if depth is None and not constant and not decorators:
                bucketed.append(i)
            elif keys[i] or constant or decorators:
                always.append(i)
    return KeyIndex(
        table=table,
        primary=primary,
        secondary=secondary_slots,
        score_primary=score_p,
        score_secondary=score_s,
        case_sensitive=[case_sensitive] * n,
        whole_words=[whole_words] * n,
        by_needle=_buckets(bucketed, [keys[i] for i in bucketed], nid),
        always=always,
        delay_levels=sorted({level for level in map(_DELAY, entries) if level}),
    )


def _buckets(
    owners: list[int], keys: list[tuple[str, ...]], nid: Callable[[str], int]
) -> dict[int, list[int]]:
    """Needle id -> the entries (of ``owners``, ascending) with a key of that needle, each
    once; ``keys[j]`` are the keys of entry ``owners[j]``."""
    needles = map(nid, chain.from_iterable(keys))
    entries = chain.from_iterable(map(repeat, owners, map(len, keys)))
    buckets: dict[int, list[int]] = {}
    get = buckets.get
    for needle, i in zip(needles, entries, strict=True):  # one flat loop over the pairs
        bucket = get(needle)
        if bucket is None:
            buckets[needle] = [i]
        elif bucket[-1] != i:  # an entry listing a key twice is in its bucket once
            bucket.append(i)
    return buckets


def _entry_keys(
    entries: Sequence[CompiledEntry], case_sensitive: bool, whole_words: bool
) -> KeyIndex:
    """The index of any book, entry by entry."""
    table = NeedleTable()
    primary: list[tuple[KeySlot, ...]] = []
    secondary: list[tuple[KeySlot, ...]] = []
    score_p: list[tuple[int, ...]] = []
    score_s: list[tuple[int, ...]] = []
    cs_list: list[bool] = []
    ww_list: list[bool] = []
    by_needle: dict[int, list[int]] = {}
    always: list[int] = []
    levels: set[float] = set()

    # A big book repeats keys: each (key, case, whole words) is made a slot once, and whether
    # the matcher indexes it (its presence per segment precomputed) is remembered with it.
    made: dict[tuple[bool, bool], tuple[dict[str, KeySlot], set[str]]] = {}

    def flags_memo(cs: bool, ww: bool) -> tuple[dict[str, KeySlot], set[str]]:
        memo = made.get((cs, ww))
        if memo is None:
            memo = made[(cs, ww)] = ({}, set())
        return memo

    def fill(keys: tuple[str, ...], cs: bool, ww: bool) -> None:
        slot_of, unindexed = flags_memo(cs, ww)
        for raw in keys:
            if raw in slot_of:
                continue
            if raw == "":
                slot_of[raw] = (raw, -1)
            elif has_macro(raw):
                slot_of[raw] = (raw, None)
                unindexed.add(raw)
            else:
                nid = table.intern(js_trim(raw), cs, ww)
                slot_of[raw] = (raw, nid)
                if table.get(nid).kind not in INDEXED_KINDS:
                    unindexed.add(raw)

    for i, e in enumerate(entries):
        cs = case_sensitive if e.case_sensitive is None else e.case_sensitive
        ww = whole_words if e.match_whole_words is None else e.match_whole_words
        cs_list.append(cs)
        ww_list.append(ww)
        slot_of, unindexed = made.get((cs, ww)) or flags_memo(cs, ww)
        keys = e.keys
        if not all(map(slot_of.__contains__, keys)):
            fill(keys, cs, ww)
        p = tuple(map(slot_of.__getitem__, keys))
        primary.append(p)
        if e.secondary:
            if not all(map(slot_of.__contains__, e.secondary)):
                fill(e.secondary, cs, ww)
            secondary.append(tuple(map(slot_of.__getitem__, e.secondary)))
        else:
            secondary.append(())
        if e.group_names:
            score_p.append(tuple(table.intern(k, cs, ww) for k in e.keys))
            score_s.append(tuple(table.intern(k, cs, ww) for k in e.secondary))
        else:
            score_p.append(())
            score_s.append(())
        if e.delay_until_recursion:
            levels.add(e.delay_until_recursion)
        if e.disable:
            continue
        if (
            e.scan_depth is None
            and not e.constant
            and not e.decorators
            and (not unindexed or unindexed.isdisjoint(keys))
        ):
            for _, nid in p:
                if nid is not None and nid >= 0:
                    lst = by_needle.setdefault(nid, [])
                    if not lst or lst[-1] != i:
                        lst.append(i)
        elif e.keys or e.constant or e.decorators:
            always.append(i)
    return KeyIndex(
        table=table,
        primary=primary,
        secondary=secondary,
        score_primary=score_p,
        score_secondary=score_s,
        case_sensitive=cs_list,
        whole_words=ww_list,
        by_needle=by_needle,
        always=always,
        delay_levels=sorted(levels),
    )


def _regex_literals(table: NeedleTable) -> dict[int, int]:
    """Regex keys with a required literal get that literal as a plain substring needle, so the
    pre-filter ("can this regex match this view at all?") is a lookup, not a text search."""
    literal_ids: dict[int, int] = {}
    for nid in table.regex_ids():
        regex = table.get(nid).regex
        if regex is None or regex.literal is None or table.get(nid).kind != KIND_REGEX:
            continue
        if "u" in regex.flags and "i" in regex.flags:
            continue
        if "\n" in regex.literal or "\x01" in regex.literal or "\r" in regex.literal:
            continue
        literal_ids[nid] = table.intern(regex.literal, "i" not in regex.flags, False)
    return literal_ids
