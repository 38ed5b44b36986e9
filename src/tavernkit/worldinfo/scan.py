"""The world-info scan loop (SillyTavern's ``checkWorldInfo``).

Loop states: INITIAL, then RECURSION (new entries' content becomes scannable text),
MIN_ACTIVATIONS (the scan depth widens by one message until enough entries are active), and
delayed recursion levels. Within a loop, entries are checked in sorted order (disable,
triggers, character filters, timed effects, recursion flags, decorators, forced activation,
constant/sticky, primary keys, secondary-key logic: :mod:`~tavernkit.worldinfo.entry_check`);
the loop's activations then go through
inclusion groups, probability and the token budget. See :mod:`tavernkit.worldinfo` for the
compat differences.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Required, TypedDict, Unpack

from tavernkit.jscompat import (
    js_round,
    js_to_number,
)
from tavernkit.worldinfo.assemble import assemble
from tavernkit.worldinfo.buffer import FIELD_NAMES
from tavernkit.worldinfo.entry_check import (
    LOOP_INITIAL,
    LOOP_MIN_ACTIVATIONS,
    LOOP_NONE,
    LOOP_RECURSION,
    EntryChecks,
    ScanRequest,
)
from tavernkit.worldinfo.groups import GroupRules, filter_by_inclusion_groups
from tavernkit.worldinfo.index import Book, WorldInfoEngine, default_engine
from tavernkit.worldinfo.index import has_macro as _has_macro
from tavernkit.worldinfo.result import WorldInfoResult
from tavernkit.worldinfo.settings import ScanSettings
from tavernkit.worldinfo.tokens import ByteEstimate, TokenCounter, estimate_tokens

__all__ = ["COMPAT_ST_118", "ScanOptions", "scan"]

COMPAT_ST_118 = "st-1.18"
#: the draws of a scan given no ``rng``: one unseeded generator for the process (seeding one
#: reads the OS's entropy, 11 µs and a syscall that every chat turn's scan paid)
_UNSEEDED = random.Random().random

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


class ScanOptions(TypedDict, total=False):
    """:func:`scan`'s keyword options (what each does: its docstring); ``max_context`` is
    required."""

    max_context: Required[int | float]
    settings: ScanSettings | Mapping[str, Any] | Any | None
    global_scan_data: Mapping[str, Any] | None
    trigger: str
    inject: Sequence[str]
    character_filename: str | None
    character_tags: Sequence[str] | None
    timed_state: Mapping[str, Any] | None
    force_activate: Iterable[str]
    substitute: Callable[[str], str] | None
    count_tokens: TokenCounter
    rng: Callable[[], float] | None
    dry_run: bool
    compat: str
    engine: WorldInfoEngine | None
    explain: bool
    content_filter: Callable[[str, Any], str] | None


def scan(
    books: Iterable[Book | tuple[Any, ...]],
    chat: Sequence[str],
    **options: Unpack[ScanOptions],
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
    ``content_filter(content, depth)`` rewrites each activated entry's text as it goes into
    the result (the regex scripts' WORLD_INFO pass; ``depth`` is the entry's for ``@depth``
    entries, else ``None``); an entry it empties is left out, as SillyTavern leaves it.
    """
    unknown = sorted(set(options) - set(ScanOptions.__annotations__))
    if unknown:
        raise TypeError(f"scan() got an unexpected keyword argument {unknown[0]!r}")
    if "max_context" not in options:
        raise TypeError("scan() missing 1 required keyword-only argument: 'max_context'")
    o = options
    engine = o.get("engine")
    eng = engine if engine is not None else default_engine()
    cfg = ScanSettings.coerce(o.get("settings"))
    compat_mode = o.get("compat", "default") == COMPAT_ST_118
    idx = eng.index(
        _as_books(books),
        strategy=cfg.character_strategy,
        case_sensitive=cfg.case_sensitive,
        whole_words=cfg.match_whole_words,
        compat=compat_mode,
    )
    rng = o.get("rng")
    request = ScanRequest(
        # a Sequence (the turn's scan texts may be partly unloaded): read, never copied
        chat=chat if isinstance(chat, Sequence) else list(chat),
        max_context=o["max_context"],
        fields=_fields(o.get("global_scan_data")),
        trigger=o.get("trigger", "normal"),
        inject=o.get("inject", ()),
        character_filename=o.get("character_filename"),
        character_tags=o.get("character_tags"),
        timed_state=o.get("timed_state"),
        force_activate=set(o.get("force_activate", ())),
        substitute=o.get("substitute") or _identity,
        count_tokens=o.get("count_tokens", estimate_tokens),
        rng=rng if rng is not None else _UNSEEDED,
        dry_run=o.get("dry_run", False),
        compat=compat_mode,
        explain=o.get("explain", False),
    )
    run = _Scan(idx, eng, cfg, request)
    run.content_filter = o.get("content_filter")
    return run.run()


def _utf8_len(text: str) -> int:
    # ASCII is flagged on the str object, so the common case costs no encoding.
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class _Scan(EntryChecks):
    """One scan: the loop over its entries (the state and the per-entry checks are
    :class:`~tavernkit.worldinfo.entry_check.EntryChecks`)."""

    #: the regex scripts' pass over each emitted entry (see :func:`scan`)
    content_filter: Callable[[str, Any], str] | None = None

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
        state = LOOP_INITIAL
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
            next_state = LOOP_NONE
            gview = self.buffer.view_for(None, self.depth, 0, True)
            if gview.n_msgs > added_upto:
                self.buffer.scan_to(gview.n_msgs)
                for bucket in self.buffer.buckets[added_upto : gview.n_msgs]:
                    for nid in bucket:
                        cand_base.update(by_needle.get(nid, ()))
                added_upto = gview.n_msgs
            cands = cand_base | cand_rec if state != LOOP_MIN_ACTIVATIONS else cand_base
            if rec is not None:
                if state == LOOP_RECURSION:
                    rec.loop += 1
                elif state == LOOP_MIN_ACTIVATIONS:
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
                GroupRules(
                    is_sticky=lambda i: bool(timed.sticky) and entries[i].hash in timed.sticky,
                    is_cooldown=lambda i: (
                        bool(timed.cooldown) and entries[i].hash in timed.cooldown
                    ),
                    is_delay=lambda i: bool(timed.delay) and entries[i].hash in timed.delay,
                    score=functools.partial(self._score, state=state),
                    global_scoring=cfg.use_group_scoring,
                    rng=self.rng,
                    compat=self.compat,
                    note=rec.group_loss if rec is not None else None,
                ),
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
                next_state = LOOP_RECURSION
            if (
                cfg.recursive
                and not overflowed
                and state == LOOP_MIN_ACTIVATIONS
                and self.buffer.recursion
            ):
                next_state = LOOP_RECURSION
            min_unsatisfied = cfg.min_activations > 0 and len(activated) < cfg.min_activations
            if not next_state and not overflowed and min_unsatisfied:
                depth_now = self.depth
                over_max = (
                    cfg.min_activations_depth_max > 0 and depth_now > cfg.min_activations_depth_max
                ) or depth_now > len(self.chat)
                if not over_max:
                    next_state = LOOP_MIN_ACTIVATIONS
                    skew += 1
                    self.depth = js_to_number(cfg.depth) + skew
                    self._views.clear()
            if next_state == LOOP_NONE and levels:
                next_state = LOOP_RECURSION
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
            content_filter=self.content_filter,
        )
        if rec is not None:
            result = dataclasses.replace(result, explain=rec.finish(activated_idx))
        return result
