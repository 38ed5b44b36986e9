"""The text a scan looks at (SillyTavern's ``WorldInfoBuffer``), without rebuilding it.

SillyTavern joins ``\\x01`` + the newest ``depth`` messages (``\\n\\x01``-separated), the card and
persona fields the entry opted into, the inject buffer and the recursion buffer into a fresh
string *per entry per loop*, and lowercases it per key. Here every segment is matched once
(:class:`~tavernkit.worldinfo.matcher.SegmentMatcher`) and a key's presence in an entry's view
is a lookup: the first message index where it occurs, the fields and the recursion chunks where
it occurs. The joined string is built only for regex keys and the rare "slow" keys, once per
distinct view per loop — except segment-local regex keys (most real ones), which are searched
per segment: messages once per scan, recursion chunks once each as they arrive, so a deep
recursion does not re-search the whole accumulated recursion buffer every loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tavernkit.jscompat import js_lower, js_to_number, js_trim
from tavernkit.worldinfo.matcher import (
    INDEXED_KINDS,
    KIND_EMPTY,
    KIND_REGEX,
    KIND_RXWORD,
    NeedleTable,
    SegmentMatcher,
    plain_match,
)
from tavernkit.worldinfo.regex_keys import RegexGuard

__all__ = ["FIELD_NAMES", "MAX_SCAN_DEPTH", "ScanBuffer", "View", "scan_chat"]

MAX_SCAN_DEPTH = 1000
_MATCHER = "\x01"
_JOINER = "\n\x01"

#: ``global_scan_data`` keys in the order SillyTavern appends them (bit i of an entry's mask).
FIELD_NAMES = (
    "personaDescription",
    "characterDescription",
    "characterPersonality",
    "characterDepthPrompt",
    "scenario",
    "creatorNotes",
)


@dataclass(frozen=True, slots=True)
class View:
    """What one entry sees in one loop: ``n_msgs`` newest messages (0 with ``empty`` = the
    whole text is ``''``), the fields it opted into that are non-empty, and whether the
    recursion buffer counts (not in min-activation loops)."""

    n_msgs: int
    fields: int
    recursion: bool
    empty: bool = False


EMPTY_VIEW = View(0, 0, False, True)


def scan_chat(
    messages: Iterable[Mapping[str, Any] | Any],
    *,
    include_names: bool = True,
    substitute: Callable[[str], str] | None = None,
    trigger: str = "normal",
) -> list[str]:
    """The scan texts, newest first, as ``Generate`` builds them: system messages dropped,
    the last message dropped on a swipe, the first message macro-substituted, and
    ``"name: text"`` when ``include_names``. Accepts dicts or objects with ``name``/``mes``
    (or ``content``)/``is_system``."""
    kept: list[tuple[str, str]] = []
    for msg in messages:
        get = (
            msg.get
            if isinstance(msg, dict | Mapping)
            else lambda k, d=None, m=msg: getattr(m, k, d)
        )
        if get("is_system", False):
            continue
        text = get("mes", None)
        if text is None:
            text = get("content", "")
        kept.append((str(get("name", "") or ""), text if isinstance(text, str) else str(text)))
    if trigger == "swipe" and kept:
        kept.pop()
    if kept and substitute is not None:
        kept[0] = (kept[0][0], substitute(kept[0][1]))
    texts = [f"{name}: {mes}" if include_names else mes for name, mes in kept]
    texts.reverse()
    return texts


class ScanBuffer:
    """One scan's text state: messages (newest first), fields, inject and recursion chunks."""

    def __init__(
        self,
        chat: Sequence[str],
        fields: Sequence[str],
        inject: Sequence[str],
        table: NeedleTable,
        matcher: SegmentMatcher,
        guard: RegexGuard,
        on_regex_timeout: Callable[[str], None],
        regex_literals: Mapping[int, int] | None = None,
    ) -> None:
        self.regex_literals = regex_literals or {}
        # Read and trimmed on first use: a scan usually looks at a few of a long chat's
        # messages (and a turn may not have loaded the others).
        self._raw = chat
        self.n_messages = min(len(chat), MAX_SCAN_DEPTH)
        self.messages: list[str] = []
        self.fields = tuple(f if isinstance(f, str) else "" for f in fields)
        self.field_mask = sum(1 << i for i, f in enumerate(self.fields) if f)
        self.inject = [t for t in inject if isinstance(t, str) and t]
        self.recursion: list[str] = []
        self.table = table
        self.matcher = matcher
        self._indexed_size = matcher.size
        self._indexed = [kind in INDEXED_KINDS for kind in matcher.kinds]
        self.guard = guard
        self._on_timeout = on_regex_timeout
        self.first_msg: dict[int, int] = {}
        self.buckets: list[list[int]] = []
        self.field_hits: dict[int, int] = {}
        self.inject_hits: set[int] = set()
        self.rec_hits: set[int] = set()
        self._strings: dict[View, str] = {}
        self._folded: dict[View, str] = {}
        self._casefolded: dict[View, str] = {}
        self._memo: dict[tuple[int, View], bool] = {}
        self._local: dict[int, _LocalState] = {}
        for bit, text in enumerate(self.fields):
            if text:
                for nid in matcher.match(text):
                    self.field_hits[nid] = self.field_hits.get(nid, 0) | (1 << bit)
        for text in self.inject:
            self.inject_hits.update(matcher.match(text))

    def _trim_to(self, n: int) -> None:
        messages = self.messages
        for m in self._raw[len(messages) : n]:
            messages.append(js_trim(m) if isinstance(m, str) else "")

    @property
    def scanned(self) -> int:
        return len(self.buckets)

    def scan_to(self, depth: int) -> list[list[int]]:
        """Match messages up to ``depth``; returns the buckets of newly scanned messages
        (ids first seen in each)."""
        end = min(depth, self.n_messages)
        self._trim_to(end)
        new: list[list[int]] = []
        first = self.first_msg
        for i in range(len(self.buckets), end):
            bucket = [nid for nid in self.matcher.match(self.messages[i]) if nid not in first]
            for nid in bucket:
                first[nid] = i
            self.buckets.append(bucket)
            new.append(bucket)
        return new

    def add_recursion(self, text: str) -> frozenset[int]:
        """Append a recursion chunk; returns the needles it matched that no earlier chunk
        had (the others' entries are already candidates)."""
        self.recursion.append(text)
        hits = self.matcher.match(text) - self.rec_hits
        self.rec_hits.update(hits)
        self._strings.clear()
        self._folded.clear()
        self._casefolded.clear()
        self._memo.clear()
        return hits

    def view_for(self, scan_depth: Any, global_depth: float, mask: int, recursion: bool) -> View:
        """SillyTavern's ``get(entry, state)`` as a :class:`View`."""
        depth = global_depth if scan_depth is None else js_to_number(scan_depth)
        if depth <= 0:
            return EMPTY_VIEW
        n = 0 if math.isnan(depth) else int(min(depth, MAX_SCAN_DEPTH))
        return View(min(n, self.n_messages), mask & self.field_mask, recursion)

    def text(self, view: View) -> str:
        """The joined scan text of a view, exactly as SillyTavern builds it."""
        if view.empty:
            return ""
        cached = self._strings.get(view)
        if cached is not None:
            return cached
        self._trim_to(view.n_msgs)
        parts = [_MATCHER + _JOINER.join(self.messages[: view.n_msgs])]
        for bit, field_text in enumerate(self.fields):
            if view.fields & (1 << bit):
                parts.append(field_text)
        if self.inject:
            parts.append(_JOINER.join(self.inject))
        if view.recursion and self.recursion:
            parts.append(_JOINER.join(self.recursion))
        text = _JOINER.join(parts)
        self._strings[view] = text
        return text

    def _folded_text(self, view: View) -> str:
        folded = self._folded.get(view)
        if folded is None:
            folded = self._folded[view] = js_lower(self.text(view))
        return folded

    def _casefolded_text(self, view: View) -> str:
        # /iu matches by simple case folding (e.g. KELVIN SIGN ~ k, long s ~ s): a superset
        # test for the regex pre-filter.
        key = View(view.n_msgs, view.fields, view.recursion, view.empty)
        folded = self._casefolded.get(key)
        if folded is None:
            folded = self._casefolded[key] = self.text(view).casefold()
        return folded

    def matches(self, nid: int, view: View) -> bool:
        """Whether needle ``nid`` matches the view (SillyTavern's ``matchKeys``)."""
        if nid < self._indexed_size and self._indexed[nid]:
            # Presence per segment is known: the first message, the fields, inject, recursion.
            if view.empty:
                return False
            if min(view.n_msgs, self.n_messages) > len(self.buckets):
                self.scan_to(view.n_msgs)  # a view not scanned yet (the scan loop scans first)
            first = self.first_msg.get(nid)
            if first is not None and first < view.n_msgs:
                return True
            if view.fields and self.field_hits.get(nid, 0) & view.fields:
                return True
            if nid in self.inject_hits:
                return True
            return view.recursion and nid in self.rec_hits
        needle = self.table.get(nid)
        kind = needle.kind
        if kind == KIND_EMPTY:
            return True
        if kind in (KIND_REGEX, KIND_RXWORD):
            return self._regex(nid, view)
        if view.empty:
            return False
        memo_key = (nid, view)
        hit = self._memo.get(memo_key)
        if hit is None:
            hay = self.text(view) if needle.case_sensitive else self._folded_text(view)
            hit = self._memo[memo_key] = plain_match(hay, needle)
        return hit

    def _regex(self, nid: int, view: View) -> bool:
        memo_key = (nid, view)
        hit = self._memo.get(memo_key)
        if hit is None:
            needle = self.table.get(nid)
            regex = needle.regex
            assert regex is not None
            literal_id = self.regex_literals.get(nid)
            if literal_id is not None and not self.matches(literal_id, view):
                self._memo[memo_key] = False
                return False
            if literal_id is None and regex.literal is not None:
                hay = self.text(view)
                if "i" in regex.flags:
                    hay = (
                        self._casefolded_text(view)
                        if "u" in regex.flags
                        else self._folded_text(view)
                    )
                if regex.literal not in hay:
                    self._memo[memo_key] = False
                    return False
            if regex.local:
                result = self._local_regex(nid, view)
            else:
                result = self.guard.test(regex, self.text(view))
            if result is None:
                self._on_timeout(needle.text)
                result = False
            hit = self._memo[memo_key] = result
        return hit

    def _local_regex(self, nid: int, view: View) -> bool | None:
        """A segment-local regex (:func:`~tavernkit.worldinfo.regex_keys.is_segment_local`)
        on a view: the joined text matches iff one of its segments does, so each message,
        field, the inject text and each recursion chunk is searched once per scan, not once
        per view and loop; a recursion loop searches only the chunks added since. ``None``:
        the pattern timed out."""
        if view.empty:
            return False  # local patterns never match ""
        regex = self.table.get(nid).regex
        assert regex is not None
        state = self._local.get(nid)
        if state is None:
            state = self._local[nid] = _LocalState()
        test = self.guard.test
        n = view.n_msgs
        self._trim_to(n)
        if state.first_msg < 0 and state.msgs_checked < n:
            start = state.msgs_checked
            found = test(regex, _JOINER.join(self.messages[start:n]))
            if found is None:
                return None
            state.msgs_checked = n
            if found:
                for k in range(start, n):
                    hit = test(regex, self.messages[k])
                    if hit is None:
                        return None
                    if hit:
                        state.first_msg, state.msgs_checked = k, k + 1
                        break
        if 0 <= state.first_msg < n:
            return True
        if view.fields:
            if state.fields < 0:
                state.fields = 0
                for bit, text in enumerate(self.fields):
                    if text:
                        hit = test(regex, text)
                        if hit is None:
                            return None
                        state.fields |= (1 << bit) if hit else 0
            if state.fields & view.fields:
                return True
        if self.inject:
            if state.inject is None:
                state.inject = test(regex, _JOINER.join(self.inject))
                if state.inject is None:
                    return None
            if state.inject:
                return True
        if view.recursion and len(self.recursion) > state.rec_checked and not state.rec_hit:
            hit = test(regex, _JOINER.join(self.recursion[state.rec_checked :]))
            if hit is None:
                return None
            state.rec_hit = hit
            state.rec_checked = len(self.recursion)
        return view.recursion and state.rec_hit


@dataclass(slots=True)
class _LocalState:
    """What one segment-local regex has found so far in this scan's segments."""

    msgs_checked: int = 0  # messages [0, msgs_checked) searched ...
    first_msg: int = -1  # ... and the first that matched (-1: none)
    fields: int = -1  # bit mask of matching fields (-1: not searched yet)
    inject: bool | None = None
    rec_checked: int = 0  # recursion chunks searched
    rec_hit: bool = False
