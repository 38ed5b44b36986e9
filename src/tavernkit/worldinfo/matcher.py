"""Plain-key matching: every key in one pass per text segment.

SillyTavern lowercases the whole scan text and runs one regex per key per entry per loop. Here
each distinct needle (key text + case-sensitivity + whole-word flag) is interned once, and a
segment (one message, one card field, one recursion chunk) is matched against all of them at
once:

- whole-word keys made only of ASCII word characters (almost all keys) are looked up in the
  set of the segment's maximal ``[A-Za-z0-9_]`` runs: with SillyTavern's ``(?:^|\\W)key(?:$|\\W)``
  and ASCII ``\\W`` such a key matches exactly when it *is* one of those runs;
- every other plain key goes through one Aho-Corasick automaton, with the whole-word boundary
  checked per hit (ASCII ``\\W``, so non-ASCII letters are boundaries, as in JS);
- regex keys of the shape ``/\\bword\\b/``, ``/\\b(?:elf|elves)\\b/i``, ``/\\bdragons?\\b/i``
  (``KIND_RXWORD``) are the same run lookup over the segment's *original* runs, lowercased
  ASCII-only under ``i`` (JS ``/i`` without ``u`` never folds a non-ASCII letter to ASCII);
  see :func:`~tavernkit.worldinfo.regex_keys.word_alternatives` for the proof.

Segments in SillyTavern's scan text are joined by ``\\n\\x01`` (both non-word characters), so a
key matches the joined text iff it matches one segment — except keys containing ``\\x01`` or
ending in a newline, which are matched on the joined text (:func:`plain_match`, "slow" needles).
"""

from __future__ import annotations

import re
from itertools import repeat
from typing import Any, NamedTuple

import ahocorasick  # type: ignore[import-not-found]

from tavernkit.jscompat import JS_WHITESPACE, js_lower
from tavernkit.worldinfo.regex_keys import RegexKey, parse_regex_key, word_alternatives

__all__ = [
    "INDEXED_KINDS",
    "KIND_AC",
    "KIND_EMPTY",
    "KIND_REGEX",
    "KIND_RXWORD",
    "KIND_SLOW",
    "KIND_WORD",
    "Needle",
    "NeedleTable",
    "SegmentMatcher",
    "is_word",
    "plain_match",
]

KIND_EMPTY, KIND_REGEX, KIND_WORD, KIND_AC, KIND_SLOW, KIND_RXWORD = range(6)
#: Needles a :class:`SegmentMatcher` indexes (their presence per segment is precomputed).
INDEXED_KINDS = frozenset((KIND_WORD, KIND_AC, KIND_RXWORD))

_WORD_RUN = re.compile(r"[A-Za-z0-9_]+")
_PURE_WORD = re.compile(r"[A-Za-z0-9_]+\Z")
_JS_WS = re.compile("[" + re.escape(JS_WHITESPACE) + "]")
#: Whether a key is one ASCII word (``[A-Za-z0-9_]+``): as a whole-word key, a ``KIND_WORD``.
is_word = _PURE_WORD.match


def _is_word_char(ch: str) -> bool:
    return ch.isascii() and (ch.isalnum() or ch == "_")


class Needle(NamedTuple):
    """A key as matched: ``text`` is the key string, ``folded`` the form compared with the
    (lowercased unless ``case_sensitive``) haystack; ``boundary`` = whole-word check.

    A named tuple, not a frozen dataclass: a big book interns thousands on a cold scan, and a
    tuple is made ~4x faster (a frozen dataclass sets each field through ``object.__setattr__``).
    """

    text: str
    kind: int
    case_sensitive: bool
    boundary: bool
    folded: str
    regex: RegexKey | None
    #: ``KIND_RXWORD``: the whole words the regex denotes (ASCII-lowercased unless
    #: ``case_sensitive``), see :func:`~tavernkit.worldinfo.regex_keys.word_alternatives`.
    words: frozenset[str] = frozenset()


class NeedleTable:
    """Interns needles: ``(text, case_sensitive, whole_words)`` -> id.

    A table made with ``base=`` is a per-scan overlay: it sees the base's needles (ids below
    ``len(base)``) and interns new ones (macro-substituted keys) without changing the shared,
    cached base.
    """

    def __init__(self, base: NeedleTable | None = None) -> None:
        self.base = base
        self._offset = len(base) if base is not None else 0
        self._own: list[Needle] = []
        self._base_needles = base.needles if base is not None else []
        self._ids: dict[tuple[str, bool, bool], int] = {}
        self._regex_ids: dict[str, int] = {}

    @property
    def needles(self) -> list[Needle]:
        if self.base is None:
            return self._own
        return self.base.needles + self._own

    def __len__(self) -> int:
        return self._offset + len(self._own)

    def get(self, nid: int) -> Needle:
        if nid < self._offset:
            return self._base_needles[nid]
        return self._own[nid - self._offset]

    def intern(self, text: str, case_sensitive: bool, whole_words: bool) -> int:
        key = (text, case_sensitive, whole_words)
        if self.base is not None:
            found = self.base.lookup(text, case_sensitive, whole_words)
            if found is not None:
                return found
        found = self._ids.get(key)
        if found is not None:
            return found
        if whole_words and _PURE_WORD.match(text):
            # The common key, one ASCII word: no regex, no white space, no ``\x01``.
            nid = len(self)
            folded = text if case_sensitive else text.lower()
            self._own.append(Needle(text, KIND_WORD, case_sensitive, True, folded, None))
            self._ids[key] = nid
            return nid
        found = self._regex_ids.get(text)
        if found is not None:
            self._ids[key] = found
            return found
        regex = parse_regex_key(text) if text.startswith("/") else None
        if regex is not None:
            nid = len(self)
            words = word_alternatives(regex.pattern, regex.flags)
            if words:
                needle = Needle(text, KIND_RXWORD, "i" not in regex.flags, True, text, regex, words)
            else:
                needle = Needle(text, KIND_REGEX, True, False, text, regex)
            self._own.append(needle)
            self._regex_ids[text] = nid
            self._ids[key] = nid
            return nid
        folded = text if case_sensitive else js_lower(text)
        # A key with inner white space is matched as a plain substring (SillyTavern splits on
        # /\s+/ and only checks boundaries for single words).
        boundary = whole_words and _JS_WS.search(folded) is None
        if folded == "":
            kind = KIND_EMPTY
        elif "\x01" in folded or folded.endswith(("\n", "\r", "\u2028", "\u2029")):
            kind = KIND_SLOW
        elif boundary and _PURE_WORD.match(folded):
            kind = KIND_WORD
        else:
            kind = KIND_AC
        nid = len(self)
        self._own.append(Needle(text, kind, case_sensitive, boundary, folded, None))
        self._ids[key] = nid
        return nid

    def add_words(self, words: list[str], case_sensitive: bool) -> range:
        """Intern ``words`` (distinct, each :func:`is_word`) as whole-word needles in one go,
        into a table that holds none yet: what :meth:`intern` would make of each, in order."""
        if self.base is not None or self._own:
            raise ValueError("add_words fills an empty base table")
        ids = range(len(words))
        folded = words if case_sensitive else list(map(str.lower, words))
        flags = repeat(KIND_WORD), repeat(case_sensitive), repeat(True)
        fields = zip(words, *flags, folded, repeat(None), repeat(frozenset()))
        # ``tuple.__new__``: a named tuple made from its fields in C (its own ``__new__`` is
        # a Python function; thousands of words make it count).
        self._own.extend(map(tuple.__new__, repeat(Needle), fields))
        self._ids.update(zip(zip(words, repeat(case_sensitive), repeat(True)), ids, strict=True))
        return ids

    def regex_ids(self) -> list[int]:
        """The ids of this table's own regex needles, ascending."""
        return sorted(set(self._regex_ids.values()))

    def lookup(self, text: str, case_sensitive: bool, whole_words: bool) -> int | None:
        found = self._ids.get((text, case_sensitive, whole_words))
        if found is None and self.base is not None:
            found = self.base.lookup(text, case_sensitive, whole_words)
        return found


def plain_match(haystack_folded: str, needle: Needle) -> bool:
    """SillyTavern's plain ``matchKeys`` on an already case-folded haystack."""
    key = needle.folded
    if not key:
        return True
    if not needle.boundary:
        return key in haystack_folded
    start = haystack_folded.find(key)
    n, k = len(haystack_folded), len(key)
    while start != -1:
        end = start + k
        if (start == 0 or not _is_word_char(haystack_folded[start - 1])) and (
            end == n or not _is_word_char(haystack_folded[end])
        ):
            return True
        start = haystack_folded.find(key, start + 1)
    return False


class SegmentMatcher:
    """All indexable needles (``INDEXED_KINDS``) of a table, matched per segment."""

    def __init__(self, table: NeedleTable) -> None:
        self.size = len(table)
        self.kinds = [needle.kind for needle in table.needles]
        # Several needles can share a folded word ("Foo" and "foo" without case sensitivity).
        self._words: dict[bool, dict[str, list[int]]] = {True: {}, False: {}}
        # Word-shaped regex keys: exact runs (case-sensitive) or ASCII-lowercased runs (``i``),
        # which differ from ``toLowerCase`` for the few non-ASCII letters that lower to ASCII.
        self._rx_words: dict[bool, dict[str, list[int]]] = {True: {}, False: {}}
        ac_values: dict[bool, dict[str, list[tuple[int, int, bool]]]] = {True: {}, False: {}}
        for nid, needle in enumerate(table.needles):
            if needle.kind == KIND_WORD:
                self._words[needle.case_sensitive].setdefault(needle.folded, []).append(nid)
            elif needle.kind == KIND_RXWORD:
                for word in needle.words:
                    self._rx_words[needle.case_sensitive].setdefault(word, []).append(nid)
            elif needle.kind == KIND_AC:
                ac_values[needle.case_sensitive].setdefault(needle.folded, []).append(
                    (nid, len(needle.folded), needle.boundary)
                )
        self._automata: dict[bool, Any] = {}
        for cs, values in ac_values.items():
            if values:
                automaton = ahocorasick.Automaton()
                for word, vals in values.items():
                    automaton.add_word(word, tuple(vals))
                automaton.make_automaton()
                self._automata[cs] = automaton
        self._word_keys = {cs: frozenset(w) for cs, w in self._words.items()}
        self._rx_keys = {cs: frozenset(w) for cs, w in self._rx_words.items()}
        self.flavors = tuple(cs for cs in (False, True) if self._words[cs] or cs in self._automata)
        self._cache: dict[str, frozenset[int]] = {}

    def match(self, segment: str) -> frozenset[int]:
        """Ids of the needles that occur in ``segment`` (memoised: chats repeat)."""
        hit = self._cache.get(segment)
        if hit is not None:
            return hit
        found: set[int] = set()
        lowered_runs: list[str] | None = None
        for cs in self.flavors:
            text = segment if cs else js_lower(segment)
            words = self._words[cs]
            if words:
                runs = _WORD_RUN.findall(text)
                if not cs and segment.isascii():
                    lowered_runs = runs  # toLowerCase of ASCII is the ASCII lowering
                for word in self._word_keys[cs].intersection(runs):
                    found.update(words[word])
            automaton = self._automata.get(cs)
            if automaton is not None:
                n = len(text)
                for end, vals in automaton.iter(text):
                    for nid, k, boundary in vals:
                        if nid in found:
                            continue
                        if boundary:
                            start = end - k + 1
                            if start > 0 and _is_word_char(text[start - 1]):
                                continue
                            if end + 1 < n and _is_word_char(text[end + 1]):
                                continue
                        found.add(nid)
        if self._rx_keys[True] or self._rx_keys[False]:
            original = _WORD_RUN.findall(segment)
            if self._rx_keys[True]:
                for word in self._rx_keys[True].intersection(original):
                    found.update(self._rx_words[True][word])
            if self._rx_keys[False]:
                if lowered_runs is None:
                    lowered_runs = [run.lower() for run in original]
                for word in self._rx_keys[False].intersection(lowered_runs):
                    found.update(self._rx_words[False][word])
        result = frozenset(found)
        if len(self._cache) > 50_000:
            self._cache.clear()
        self._cache[segment] = result
        return result
