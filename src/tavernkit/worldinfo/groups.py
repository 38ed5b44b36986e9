"""Inclusion groups (SillyTavern's ``filterByInclusionGroups``).

Per group name (an entry may list several, comma-separated): sticky members win and the rest
drop; members on cooldown or delay drop; group scoring keeps only the best-matching members;
then a group already represented among activated entries drops all its new members, a
``groupOverride`` member with the highest ``order`` wins, or one member is drawn by weight.

Under ``compat="st-1.18"`` two SillyTavern bugs are kept: removing an entry that an earlier
group already removed deletes the *last* entry of the list instead (``splice(indexOf(e), 1)``
with ``-1``), and the "already activated" test compares the whole ``group`` string, so an
entry in ``"a,b"`` does not block group ``"a"``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from tavernkit.jscompat import js_key_order
from tavernkit.worldinfo.compile import CompiledEntry

__all__ = ["GroupLossNote", "GroupRules", "filter_by_inclusion_groups"]


class GroupLossNote(Protocol):
    """Told of each removal (for scan explanations): the entry removed, its group, why, and
    the entry that took the group (``None`` when no single entry did)."""

    def __call__(self, idx: int, group: str, why: str, winner: int | None, /) -> None: ...


@dataclass(frozen=True, slots=True)
class GroupRules:
    """How one scan loop settles its inclusion groups: which entries are sticky, on cooldown or
    delayed, each entry's group score, whether scoring applies to every group
    (``global_scoring``), the draw for weighted picks, SillyTavern's bugs kept (``compat``), and
    who is told of each removal (``note``, explanations only)."""

    is_sticky: Callable[[int], bool]
    is_cooldown: Callable[[int], bool]
    is_delay: Callable[[int], bool]
    score: Callable[[int], int]
    global_scoring: bool
    rng: Callable[[], float]
    compat: bool
    note: GroupLossNote | None = None


def filter_by_inclusion_groups(
    new_entries: list[int],
    entries: Sequence[CompiledEntry],
    activated: Sequence[CompiledEntry],
    rules: GroupRules,
) -> None:
    """Remove group losers from ``new_entries`` (indices into ``entries``) in place."""
    present = _filter(new_entries, entries, activated, rules)
    if present is not None and len(present) != len(new_entries):
        new_entries[:] = [i for i in new_entries if i in present]


def _filter(
    new_entries: list[int],
    entries: Sequence[CompiledEntry],
    activated: Sequence[CompiledEntry],
    rules: GroupRules,
) -> set[int] | None:
    """The entries of ``new_entries`` that survive (``None``: no groups, all survive)."""
    compat, note, global_scoring = rules.compat, rules.note, rules.global_scoring
    grouped: dict[str, list[int]] = {}
    for idx in new_entries:
        for name in entries[idx].group_names:
            grouped.setdefault(name, []).append(idx)
    if not grouped:
        return None
    order = js_key_order(grouped)
    # ``new_entries`` holds each index once, so removing by value is dropping it from a set;
    # the list is rebuilt once at the end instead of an O(n) ``list.remove`` per loser.
    present = set(new_entries)
    tail = len(new_entries) - 1

    def remove(idx: int, name: str = "", why: str = "", winner: int | None = None) -> None:
        nonlocal tail
        if idx in present:
            present.discard(idx)
            if note is not None:
                note(idx, name, why, winner)
        elif compat and present:
            # splice(-1, 1): the last entry still in the list goes.
            while new_entries[tail] not in present:
                tail -= 1
            present.discard(new_entries[tail])
            if note is not None:
                note(new_entries[tail], name, "removed by SillyTavern's splice(-1) bug", None)

    has_sticky: dict[str, bool] = {}
    for name in order:
        group = grouped[name]
        has_sticky[name] = False
        stickies = [i for i in group if rules.is_sticky(i)]
        if stickies:
            for i in group:
                if i not in stickies:
                    remove(i, name, "a sticky member keeps the group", stickies[0])
            has_sticky[name] = True
        for i in [i for i in group if rules.is_cooldown(i)]:
            remove(i, name, "on cooldown")
        for i in [i for i in group if rules.is_delay(i)]:
            remove(i, name, "delayed")

    for name in order:
        group = grouped[name]
        if not global_scoring and not any(entries[i].use_group_scoring for i in group):
            continue
        if has_sticky[name]:
            continue
        scores = [rules.score(i) for i in group]
        best = max(scores)
        pos = 0
        while pos < len(group):
            flag = entries[group[pos]].use_group_scoring
            scored = global_scoring if flag is None else flag
            if scored and scores[pos] < best:
                remove(
                    group[pos],
                    name,
                    f"lower group score ({scores[pos]} < {best})",
                    group[scores.index(best)],
                )
                del group[pos]
                del scores[pos]
                continue
            pos += 1

    if compat:
        taken = {e.group for e in activated}
    else:
        taken = {g for e in activated for g in e.group_names}
    for name in order:
        group = grouped[name]
        if has_sticky[name]:
            continue
        if name in taken:
            holder = _holder(name, entries, activated, compat) if note is not None else None
            for i in group:
                remove(i, name, "the group already has an activated entry", holder)
            continue
        if len(group) <= 1:
            continue
        prios = sorted(
            (i for i in group if entries[i].group_override), key=lambda i: -entries[i].order
        )
        why = "weighted random draw"
        if prios:
            winner = prios[0]
            why = "group override with the highest order"
        else:
            weights = [entries[i].group_weight for i in group]
            roll = rules.rng() * sum(weights)
            winner = -1
            acc = 0.0
            for i, w in zip(group, weights, strict=True):
                acc += w
                if roll <= acc:
                    winner = i
                    break
            if winner == -1:
                continue
        for i in group:
            if i != winner:
                remove(i, name, why, winner)
    return present


def _holder(
    name: str, entries: Sequence[CompiledEntry], activated: Sequence[CompiledEntry], compat: bool
) -> int | None:
    """The index of the activated entry that already holds group ``name`` (explanations only:
    a linear search, never on the hot path)."""
    for e in activated:
        if (e.group == name) if compat else (name in e.group_names):
            for j, x in enumerate(entries):
                if x is e:
                    return j
    return None
