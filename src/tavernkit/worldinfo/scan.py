"""The world-info scan loop (SillyTavern's ``checkWorldInfo``).

Loop states: INITIAL, then RECURSION (new entries' content becomes scannable text),
MIN_ACTIVATIONS (the scan depth widens by one message until enough entries are active), and
delayed recursion levels. Within a loop, entries are checked in sorted order (disable,
triggers, character filters, timed effects, recursion flags, decorators, forced activation,
constant/sticky, primary keys, secondary-key logic); the loop's activations then go through
inclusion groups, probability and the token budget. See :mod:`tavernkit.worldinfo` for the
compat differences.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tavernkit.jscompat import (
    js_round,
    js_strict_eq,
    js_to_number,
    js_trim,
)
from tavernkit.worldinfo.assemble import assemble
from tavernkit.worldinfo.buffer import FIELD_NAMES, ScanBuffer, View
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
from tavernkit.worldinfo.groups import filter_by_inclusion_groups
from tavernkit.worldinfo.index import Book, KeySlot, ScanIndex, WorldInfoEngine, default_engine
from tavernkit.worldinfo.index import has_macro as _has_macro
from tavernkit.worldinfo.matcher import NeedleTable
from tavernkit.worldinfo.result import WorldInfoResult
from tavernkit.worldinfo.settings import ScanSettings
from tavernkit.worldinfo.timed import TimedEffects
from tavernkit.worldinfo.tokens import ByteEstimate, TokenCounter, estimate_tokens

__all__ = ["COMPAT_ST_118", "scan"]

COMPAT_ST_118 = "st-1.18"
_NONE, _INITIAL, _RECURSION, _MIN_ACTIVATIONS = 0, 1, 2, 3
_SNAKE_FIELDS = {
    "persona_description": "personaDescription",
    "character_description": "characterDescription",
    "character_personality": "characterPersonality",
    "character_depth_prompt": "characterDepthPrompt",
    "scenario": "scenario",
    "creator_notes": "creatorNotes",
}


def _identity(text: str) -> str:
    return text


def _as_books(books: Iterable[Book | tuple[Any, ...]]) -> list[Book]:
    out: list[Book] = []
    for b in books:
        if isinstance(b, Book):
            out.append(b)
        else:
            out.append(Book(*b))
    return out


def _fields(data: Mapping[str, Any] | None) -> list[str]:
    if not data:
        return [""] * len(FIELD_NAMES)
    values = {_SNAKE_FIELDS.get(k, k): v for k, v in data.items()}
    return [v if isinstance(v := values.get(name, ""), str) else "" for name in FIELD_NAMES]


def scan(
    books: Iterable[Book | tuple[Any, ...]],
    chat: Sequence[str],
    *,
    max_context: int | float,
    settings: ScanSettings | Mapping[str, Any] | Any | None = None,
    global_scan_data: Mapping[str, Any] | None = None,
    trigger: str = "normal",
    inject: Sequence[str] = (),
    character_filename: str | None = None,
    character_tags: Sequence[str] | None = None,
    timed_state: Mapping[str, Any] | None = None,
    force_activate: Iterable[str] = (),
    substitute: Callable[[str], str] | None = None,
    count_tokens: TokenCounter = estimate_tokens,
    rng: Callable[[], float] | None = None,
    dry_run: bool = False,
    compat: str = "default",
    engine: WorldInfoEngine | None = None,
    explain: bool = False,
) -> WorldInfoResult:
    """Scan ``chat`` (scan texts, **newest first**, see :func:`~tavernkit.worldinfo.scan_chat`)
    against ``books`` and return what activates, in SillyTavern's output shape.

    ``max_context`` is the max *prompt* tokens (context minus response). ``global_scan_data``
    holds the persona/card texts that ``match*`` entries may scan (SillyTavern's or snake_case
    keys). ``inject`` are texts of extension prompts flagged for scanning (e.g. the Author's
    Note). ``character_filename`` is the avatar name without extension (character filters),
    ``character_tags`` the character's tag ids (``None``: no tag filtering). ``timed_state`` is
    the chat metadata ``timedWorldInfo``; the new state is in the result (a dry run leaves it
    unchanged). ``force_activate`` lists ``"world.uid"`` keys to activate regardless of keys.
    ``substitute`` expands macros in keys and content (identity by default); ``rng`` returns
    floats in [0, 1) for probability and group rolls. Same inputs and RNG, same result.
    ``explain=True`` also records why each entry fired or not (``result.explain``, see
    :mod:`tavernkit.worldinfo.explain`); off by default so the hot path pays nothing.
    """
    eng = engine if engine is not None else default_engine()
    cfg = ScanSettings.coerce(settings)
    compat_mode = compat == COMPAT_ST_118
    idx = eng.index(
        _as_books(books),
        strategy=cfg.character_strategy,
        case_sensitive=cfg.case_sensitive,
        whole_words=cfg.match_whole_words,
        compat=compat_mode,
    )
    run = _Scan(
        idx,
        eng,
        cfg,
        # a Sequence (the turn's scan texts may be partly unloaded): read, never copied
        chat=chat if isinstance(chat, Sequence) else list(chat),
        max_context=max_context,
        fields=_fields(global_scan_data),
        trigger=trigger,
        inject=inject,
        character_filename=character_filename,
        character_tags=character_tags,
        timed_state=timed_state,
        force_activate=set(force_activate),
        substitute=substitute or _identity,
        count_tokens=count_tokens,
        rng=rng if rng is not None else random.Random().random,
        dry_run=dry_run,
        compat=compat_mode,
        explain=explain,
    )
    return run.run()


def _utf8_len(text: str) -> int:
    # ASCII is flagged on the str object, so the common case costs no encoding.
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class _Scan:
    """One scan's mutable state (kept out of :func:`scan` to keep each step readable)."""

    def __init__(
        self,
        idx: ScanIndex,
        engine: WorldInfoEngine,
        cfg: ScanSettings,
        *,
        chat: Sequence[str],
        max_context: int | float,
        fields: list[str],
        trigger: str,
        inject: Sequence[str],
        character_filename: str | None,
        character_tags: Sequence[str] | None,
        timed_state: Mapping[str, Any] | None,
        force_activate: set[str],
        substitute: Callable[[str], str],
        count_tokens: TokenCounter,
        rng: Callable[[], float],
        dry_run: bool,
        compat: bool,
        explain: bool = False,
    ) -> None:
        self.idx = idx
        self.entries = idx.entries
        self.cfg = cfg
        self.chat = chat
        self.max_context = max_context
        self.trigger = trigger
        self.char_name = character_filename
        self.char_tags = character_tags
        self.forced = force_activate
        self.substitute = substitute
        self.count_tokens = count_tokens
        self.rng = rng
        self.dry_run = dry_run
        self.compat = compat
        self.warnings: list[str] = list(idx.warnings)
        self.table = NeedleTable(base=idx.table)
        self._subst: dict[str, str] = {}
        self._timed_out: set[str] = set()
        self.timed = TimedEffects(timed_state, idx.entries, len(chat), dry_run=dry_run)
        self.buffer = ScanBuffer(
            chat,
            fields,
            inject,
            self.table,
            idx.matcher,
            engine.guard,
            self._regex_timeout,
            idx.regex_literals,
        )
        self.content: dict[int, str] = {}
        self._views: dict[tuple[Any, ...], View] = {}
        self.rec = ExplainRecorder(idx.entries) if explain else None
        self._roll = 0.0

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
        key = (self.idx.view_keys[i], state != _MIN_ACTIVATIONS)
        view = self._views.get(key)
        if view is None:
            e = self.entries[i]
            view = self.buffer.view_for(
                e.scan_depth, self.depth, e.match_mask, state != _MIN_ACTIVATIONS
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

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> WorldInfoResult:
        cfg = self.cfg
        budget = js_round(js_to_number(cfg.budget) * js_to_number(self.max_context) / 100)
        if not budget or math.isnan(budget):
            budget = 1.0
        if cfg.budget_cap > 0 and budget > cfg.budget_cap:
            budget = float(cfg.budget_cap)
        self.timed.check()
        if not self.entries:
            return WorldInfoResult(
                timed_state=self.timed.state,
                warnings=tuple(self.warnings),
                explain=self.rec.finish(set()) if self.rec is not None else None,
            )

        entries = self.entries
        timed = self.timed
        levels = list(self.idx.delay_levels)
        level = levels.pop(0) if levels else 0.0
        skew = 0
        self.depth = js_to_number(cfg.depth)
        state = _INITIAL
        overflowed = False
        count = 0
        activated: dict[str, int] = {}
        activated_idx: set[int] = set()
        failed: set[int] = set()
        all_text = ""
        all_text_bytes = 0
        done: list[str] = []  # default mode: the contents of ``activated``, in its order
        estimate = self.count_tokens if isinstance(self.count_tokens, ByteEstimate) else None

        # Candidate entries: an entry that needs a primary-key match can only activate once one
        # of its needles is in view, so only those (and the always-checked ones) are visited.
        by_needle = self.idx.by_needle
        cand_base: set[int] = set(self.idx.always)
        cand_rec: set[int] = set()
        if timed.sticky or self.forced:
            for i, e in enumerate(entries):
                if (timed.sticky and e.hash in timed.sticky) or e.key_id in self.forced:
                    cand_base.add(i)
        for nid in list(self.buffer.field_hits) + list(self.buffer.inject_hits):
            cand_base.update(by_needle.get(nid, ()))
        added_upto = 0
        rec = self.rec

        while state:
            if cfg.max_recursion_steps and cfg.max_recursion_steps <= count:
                break
            count += 1
            next_state = _NONE
            gview = self.buffer.view_for(None, self.depth, 0, True)
            if gview.n_msgs > added_upto:
                self.buffer.scan_to(gview.n_msgs)
                for bucket in self.buffer.buckets[added_upto : gview.n_msgs]:
                    for nid in bucket:
                        cand_base.update(by_needle.get(nid, ()))
                added_upto = gview.n_msgs
            cands = cand_base | cand_rec if state != _MIN_ACTIVATIONS else cand_base
            if rec is not None:
                if state == _RECURSION:
                    rec.loop += 1
                elif state == _MIN_ACTIVATIONS:
                    rec.min_activations = True
            activated_now: list[int] = []
            for i in sorted(cands - failed - activated_idx):
                if entries[i].key_id in activated:  # a duplicate uid already activated
                    if rec is not None:
                        rec.candidate(i, "duplicate", "an entry with the same uid already fired")
                    continue
                code = self._check(i, state, level)
                if code > 0:
                    activated_now.append(i)
                if rec is not None:
                    self._explain_check(rec, i, code, state)

            def sort_key(i: int) -> tuple[int, int]:
                sticky = 0 if timed.sticky and entries[i].hash in timed.sticky else 1
                if self.compat and entries[i].key_id in self.forced:
                    return (sticky, -1)
                return (sticky, i)

            if timed.sticky or (self.compat and self.forced):
                new_entries = sorted(activated_now, key=sort_key)
            else:
                new_entries = activated_now  # already ascending: the sort would keep it
            if estimate is not None:
                text_tokens = estimate.from_bytes(all_text_bytes)
            else:
                text_tokens = self.count_tokens(all_text)

            filter_by_inclusion_groups(
                new_entries,
                entries,
                [entries[j] for j in activated.values()] if self.idx.has_groups else (),
                is_sticky=lambda i: bool(timed.sticky) and entries[i].hash in timed.sticky,
                is_cooldown=lambda i: bool(timed.cooldown) and entries[i].hash in timed.cooldown,
                is_delay=lambda i: bool(timed.delay) and entries[i].hash in timed.delay,
                score=functools.partial(self._score, state=state),
                global_scoring=cfg.use_group_scoring,
                rng=self.rng,
                compat=self.compat,
                note=rec.group_loss if rec is not None else None,
            )

            ignores_budget = sum(1 for i in new_entries if entries[i].ignore_budget)
            new_content = ""
            new_bytes = 0
            over_budget: set[int] = set()
            reached: set[int] = set()
            for i in new_entries:
                e = entries[i]
                ignores_budget -= 1 if e.ignore_budget else 0
                if overflowed and not e.ignore_budget:
                    if ignores_budget > 0:
                        continue
                    break
                reached.add(i)
                if not e.certain and not self._probability(e):
                    failed.add(i)
                    if rec is not None:
                        rec.probability_failed(i, self._roll, e.probability)
                    continue
                # SillyTavern substitutes the entry's current content, so an entry re-activated
                # after hitting the budget is substituted twice; the default starts afresh.
                base = self._entry_content(i) if self.compat else e.output_content
                content = self.substitute(base) if _has_macro(base) else base
                self.content[i] = content
                if estimate is not None:
                    new_bytes += _utf8_len(content) + 1
                    new_tokens = estimate.from_bytes(new_bytes)
                else:
                    new_content += content + "\n"
                    new_tokens = self.count_tokens(new_content)
                if not e.ignore_budget and text_tokens + new_tokens >= budget:
                    overflowed = True
                    over_budget.add(i)
                    if rec is not None:
                        rec.budget(i, text_tokens + new_tokens, budget)
                    continue
                activated[e.key_id] = i
                activated_idx.add(i)
            if rec is not None:
                for i in new_entries:
                    if i not in reached:
                        rec.budget_skipped(i)

            successful = [i for i in new_entries if i not in failed]
            if not self.compat:
                # SillyTavern keeps entries that hit the budget (or were never reached) as
                # "successful", so their text can seed a delayed recursion level.
                successful = [i for i in successful if i in reached and i not in over_budget]
            for_recursion = [i for i in successful if not entries[i].prevent_recursion]

            if cfg.recursive and not overflowed and for_recursion:
                next_state = _RECURSION
            if (
                cfg.recursive
                and not overflowed
                and state == _MIN_ACTIVATIONS
                and self.buffer.recursion
            ):
                next_state = _RECURSION
            min_unsatisfied = cfg.min_activations > 0 and len(activated) < cfg.min_activations
            if not next_state and not overflowed and min_unsatisfied:
                depth_now = self.depth
                over_max = (
                    cfg.min_activations_depth_max > 0 and depth_now > cfg.min_activations_depth_max
                ) or depth_now > len(self.chat)
                if not over_max:
                    next_state = _MIN_ACTIVATIONS
                    skew += 1
                    self.depth = js_to_number(cfg.depth) + skew
                    self._views.clear()
            if next_state == _NONE and levels:
                next_state = _RECURSION
                level = levels.pop(0)

            state = next_state
            if state:
                text = "\n".join(self._entry_content(i) for i in for_recursion)
                if text:
                    for nid in self.buffer.add_recursion(text):
                        cand_rec.update(by_needle.get(nid, ()))
                    if self.compat:
                        all_text = text + "\n" + all_text
                        all_text_bytes += _utf8_len(text) + 1
            if not self.compat and len(activated) > len(done):
                # Count everything already in the prompt against the budget, not only the text
                # that recursed (SillyTavern's allActivatedText); activations only accumulate.
                for i in list(activated.values())[len(done) :]:
                    content = self._entry_content(i)
                    done.append(content)
                    all_text_bytes += _utf8_len(content) + 1
                if estimate is None:
                    all_text = "\n".join(done) + "\n"

        result = assemble(
            entries,
            list(activated.values()),
            self._entry_content,
            timed=self.timed,
            warnings=self.warnings,
            cache=self.idx.activated_cache,
            overflowed=overflowed,
            loops=count,
        )
        if rec is not None:
            result = dataclasses.replace(result, explain=rec.finish(activated_idx))
        return result

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
            if state != _RECURSION:
                return CHECK_DELAY_RECURSION
            if e.delay_until_recursion > level:
                return CHECK_DELAY_RECURSION
        if state == _RECURSION and self.cfg.recursive and e.exclude_recursion and not sticky:
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
