"""One entry's check in one loop of a scan: the part of SillyTavern's ``checkWorldInfo``
loop body that decides whether an entry activates (disable, triggers, character filters, timed
effects, recursion flags, decorators, forced activation, constant/sticky, primary keys, the
secondary-key logic), with the group score and the probability roll the loop asks of an
entry. :class:`EntryChecks` holds one scan's state; :mod:`tavernkit.worldinfo.scan` runs the
loop over it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tavernkit.jscompat import (
    js_strict_eq,
    js_to_number,
    js_trim,
)
from tavernkit.worldinfo.buffer import ScanBuffer, View
from tavernkit.worldinfo.compile import CompiledEntry
from tavernkit.worldinfo.explain import (
    CHECK_CHAR_FILTER,
    CHECK_CONSTANT,
    CHECK_COOLDOWN,
    CHECK_DECORATOR,
    CHECK_DELAY,
    CHECK_DELAY_RECURSION,
    CHECK_DISABLED,
    CHECK_DONT_ACTIVATE,
    CHECK_EXCLUDE_RECURSION,
    CHECK_FORCED,
    CHECK_KEY,
    CHECK_NO_MATCH,
    CHECK_SECONDARY,
    CHECK_STICKY,
    CHECK_TAG_FILTER,
    CHECK_TRIGGER,
    ExplainRecorder,
)
from tavernkit.worldinfo.index import KeySlot, ScanIndex, WorldInfoEngine
from tavernkit.worldinfo.matcher import NeedleTable
from tavernkit.worldinfo.settings import ScanSettings
from tavernkit.worldinfo.timed import TimedEffects
from tavernkit.worldinfo.tokens import TokenCounter

__all__ = [
    "LOOP_INITIAL",
    "LOOP_MIN_ACTIVATIONS",
    "LOOP_NONE",
    "LOOP_RECURSION",
    "EntryChecks",
    "ScanRequest",
]

#: The loop states of a scan (SillyTavern's ``scan_state``).
LOOP_NONE, LOOP_INITIAL, LOOP_RECURSION, LOOP_MIN_ACTIVATIONS = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class ScanRequest:
    """What one scan is asked, its defaults filled in (each field: :func:`~.scan.scan`'s
    keyword of that name). ``fields`` are the persona/card texts in
    :data:`~tavernkit.worldinfo.buffer.FIELD_NAMES` order; ``compat`` is whether
    SillyTavern 1.18's bugs are kept."""

    chat: Sequence[str]
    max_context: int | float
    fields: list[str]
    trigger: str
    inject: Sequence[str]
    character_filename: str | None
    character_tags: Sequence[str] | None
    timed_state: Mapping[str, Any] | None
    force_activate: set[str]
    substitute: Callable[[str], str]
    count_tokens: TokenCounter
    rng: Callable[[], float]
    dry_run: bool
    compat: bool
    explain: bool = False


class EntryChecks:
    """One scan's state, and what it decides about one entry in one loop."""

    def __init__(
        self, idx: ScanIndex, engine: WorldInfoEngine, cfg: ScanSettings, request: ScanRequest
    ) -> None:
        chat = request.chat
        self.idx = idx
        self.entries = idx.entries
        self.cfg = cfg
        self.chat = chat
        self.max_context = request.max_context
        self.trigger = request.trigger
        self.char_name = request.character_filename
        self.char_tags = request.character_tags
        self.forced = request.force_activate
        self.substitute = request.substitute
        self.count_tokens = request.count_tokens
        self.rng = request.rng
        self.dry_run = dry_run = request.dry_run
        self.compat = request.compat
        self.warnings: list[str] = list(idx.warnings)
        self.table = NeedleTable(base=idx.table)
        self._subst: dict[str, str] = {}
        self._timed_out: set[str] = set()
        self.timed = TimedEffects(request.timed_state, idx.entries, len(chat), dry_run=dry_run)
        self.buffer = ScanBuffer(
            chat,
            request.fields,
            request.inject,
            self.table,
            idx.matcher,
            engine.guard,
            self._regex_timeout,
            idx.regex_literals,
        )
        self.content: dict[int, str] = {}
        self._views: dict[tuple[Any, ...], View] = {}
        self.rec = ExplainRecorder(idx.entries) if request.explain else None
        self._roll = 0.0
        #: The global scan depth as the loop stands (min activations widen it by one a loop).
        self.depth = js_to_number(cfg.depth)

    # -- helpers -----------------------------------------------------------------------------

    def _regex_timeout(self, key: str) -> None:
        if key not in self._timed_out:
            self._timed_out.add(key)
            owners = [e.key_id for e in self.entries if key in e.keys or key in e.secondary]
            self.warnings.append(
                f"regex key {key!r} (entry {', '.join(owners[:3]) or '?'}) exceeded the time "
                "limit and was treated as not matching"
            )

    def _substituted(self, raw: str) -> str:
        hit = self._subst.get(raw)
        if hit is None:
            hit = self._subst[raw] = self.substitute(raw)
        return hit

    def _key_matches(self, i: int, slot: KeySlot, view: View) -> bool:
        raw, nid = slot
        if nid is None:
            text = self._substituted(raw)
            if not text:
                return False
            nid = self.table.intern(
                js_trim(text), self.idx.case_sensitive[i], self.idx.whole_words[i]
            )
        elif nid < 0:
            return False
        return self.buffer.matches(nid, view)

    def _any_key(self, i: int, slots: tuple[KeySlot, ...], view: View) -> bool:
        # The hot path of every check: static needles go straight to the buffer.
        matches = self.buffer.matches
        for slot in slots:
            nid = slot[1]
            if nid is None:
                if self._key_matches(i, slot, view):
                    return True
            elif nid >= 0 and matches(nid, view):
                return True
        return False

    def _view(self, i: int, state: int) -> View:
        # Entries share a handful of views (scan depth x opted-in fields); a view is built once
        # per loop state and global depth (``_views`` is cleared when the depth widens).
        key = (self.idx.view_keys[i], state != LOOP_MIN_ACTIVATIONS)
        view = self._views.get(key)
        if view is None:
            e = self.entries[i]
            view = self.buffer.view_for(
                e.scan_depth, self.depth, e.match_mask, state != LOOP_MIN_ACTIVATIONS
            )
            if view.n_msgs > self.buffer.scanned:
                self.buffer.scan_to(view.n_msgs)
            self._views[key] = view
        return view

    def _entry_content(self, i: int) -> str:
        found = self.content.get(i)
        if found is None:
            e = self.entries[i]
            found = e.content if self.compat else e.output_content
        return found

    def _explain_check(self, rec: ExplainRecorder, i: int, code: int, state: int) -> None:
        """Record what :meth:`_check` decided; for key matches, which keys did it (asked again
        of the same matcher, so the record agrees with the scan)."""
        if code != CHECK_KEY and code != CHECK_SECONDARY:
            rec.check(i, code, has_primary=bool(self.idx.primary[i]))
            return
        view = self._view(i, state)
        primary = ""
        for slot in self.idx.primary[i]:
            if self._key_matches(i, slot, view):
                primary = slot[0]
                break
        e = self.entries[i]
        secondary = self.idx.secondary[i] if e.selective else ()
        rec.key_check(
            i,
            fired=code == CHECK_KEY,
            primary=primary,
            primary_text=js_trim(self._substituted(primary)),
            secondary=[(slot[0], self._key_matches(i, slot, view)) for slot in secondary],
        )

    def _check(self, i: int, state: int, level: float) -> int:
        """> 0: the entry activates (how); <= 0: it does not (why); see the ``CHECK_KEY`` codes."""
        e = self.entries[i]
        if e.disable:
            return CHECK_DISABLED
        if e.triggers and not any(js_strict_eq(t, self.trigger) for t in e.triggers):
            return CHECK_TRIGGER
        if e.filter_names:
            included = self.char_name is not None and any(
                js_strict_eq(n, self.char_name) for n in e.filter_names
            )
            if included if e.filter_exclude else not included:
                return CHECK_CHAR_FILTER
        if e.filter_tags and self.char_tags is not None:
            includes = any(any(js_strict_eq(t, x) for x in e.filter_tags) for t in self.char_tags)
            if includes if e.filter_exclude else not includes:
                return CHECK_TAG_FILTER
        timed = self.timed
        sticky = bool(timed.sticky) and e.hash in timed.sticky
        if timed.delay and e.hash in timed.delay:
            return CHECK_DELAY
        if timed.cooldown and e.hash in timed.cooldown and not sticky:
            return CHECK_COOLDOWN
        if not sticky and e.delay_until_recursion:
            if state != LOOP_RECURSION:
                return CHECK_DELAY_RECURSION
            if e.delay_until_recursion > level:
                return CHECK_DELAY_RECURSION
        if state == LOOP_RECURSION and self.cfg.recursive and e.exclude_recursion and not sticky:
            return CHECK_EXCLUDE_RECURSION
        if "@@activate" in e.decorators:
            return CHECK_DECORATOR
        if "@@dont_activate" in e.decorators:
            return CHECK_DONT_ACTIVATE
        if e.key_id in self.forced:
            return CHECK_FORCED
        if e.constant:
            return CHECK_CONSTANT
        if sticky:
            return CHECK_STICKY
        primary = self.idx.primary[i]
        if not primary:
            return CHECK_NO_MATCH
        view = self._view(i, state)
        if not self._any_key(i, primary, view):
            return CHECK_NO_MATCH
        secondary = self.idx.secondary[i]
        if not (e.selective and secondary):
            return CHECK_KEY
        logic = e.logic_code
        any_match = False
        all_match = True
        for slot in secondary:
            hit = self._key_matches(i, slot, view)
            any_match = any_match or hit
            all_match = all_match and hit
            if logic == 0 and hit:
                return CHECK_KEY
            if logic == 1 and not hit:
                return CHECK_KEY
        if logic == 2 and not any_match:
            return CHECK_KEY
        return CHECK_KEY if logic == 3 and all_match else CHECK_SECONDARY

    def _score(self, i: int, *, state: int) -> int:
        e = self.entries[i]
        view = self._view(i, state)
        p_ids = self.idx.score_primary[i]
        s_ids = self.idx.score_secondary[i]
        primary = sum(1 for nid in p_ids if self.buffer.matches(nid, view))
        secondary = sum(1 for nid in s_ids if self.buffer.matches(nid, view))
        if not p_ids:
            return 0
        if s_ids:
            logic = e.wire.get("selectiveLogic")
            if js_strict_eq(logic, 0):
                return primary + secondary
            if js_strict_eq(logic, 3):
                return primary + secondary if secondary == len(s_ids) else primary
        return primary

    def _probability(self, e: CompiledEntry) -> bool:
        if e.certain:
            return True
        if self.timed.sticky and e.hash in self.timed.sticky:
            return True
        roll = self._roll = self.rng() * 100
        return roll <= js_to_number(e.probability)
