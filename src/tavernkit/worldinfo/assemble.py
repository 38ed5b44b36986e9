"""Output assembly: activated entries to SillyTavern's result shape (its positions, order and
@depth grouping)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tavernkit.jscompat import js_key_order, js_string, js_truthy
from tavernkit.worldinfo.compile import CompiledEntry
from tavernkit.worldinfo.result import ActivatedEntry, DepthGroup, ExampleEntry, WorldInfoResult
from tavernkit.worldinfo.timed import TimedEffects

__all__ = ["assemble"]


def _strict_key(value: Any) -> Any:
    """A dict key under which two JSON values are equal iff ``a === b`` (NaN and objects are
    keyed by identity: NaN equals nothing, objects only themselves)."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", value) if value == value else ("o", object())
    if value is None or isinstance(value, str):
        return ("v", value)
    return ("o", id(value))


def _activated_entry(
    e: CompiledEntry, i: int, content: str, cache: dict[int, ActivatedEntry]
) -> ActivatedEntry:
    # Immutable and usually the same from turn to turn: reuse the index's copy when the
    # emitted content is unchanged.
    found = cache.get(i)
    if found is not None and found.content == content:
        return found
    found = ActivatedEntry(
        world=e.world,
        uid=e.uid,
        key=e.key_id,
        content=content,
        position=e.position,
        order=e.order,
        depth=e.depth,
        role=e.role,
        outlet_name=e.outlet_name,
        wire=e.wire,
    )
    cache[i] = found
    return found


def assemble(
    entries: Sequence[CompiledEntry],
    order: list[int],
    content_of: Callable[[int], str],
    *,
    timed: TimedEffects,
    warnings: list[str],
    cache: dict[int, ActivatedEntry],
    overflowed: bool,
    loops: int,
    content_filter: Callable[[str, Any], str] | None = None,
) -> WorldInfoResult:
    """The scan's result from the activated entries (``order``: activation order), every
    position in SillyTavern's order; starts the activated entries' timed effects."""
    before: list[str] = []
    after: list[str] = []
    examples: list[ExampleEntry] = []
    an_top: list[str] = []
    an_bottom: list[str] = []
    depth_groups: list[dict[str, Any]] = []
    outlets: dict[str, list[str]] = {}
    by_depth: dict[tuple[Any, Any], dict[str, Any]] = {}
    for i in sorted(order, key=lambda j: -entries[j].order):
        e = entries[i]
        content = content_of(i)
        pos = e.position_code
        if content_filter is not None:
            # the regex scripts' WORLD_INFO pass: an @depth entry's depth, else none
            content = content_filter(
                content, (4 if e.depth is None else e.depth) if pos == 4 else None
            )
        if not content:
            continue
        if pos == 0:
            before.append(content)
        elif pos == 1:
            after.append(content)
        elif pos == 5:
            examples.append(ExampleEntry(0, content))
        elif pos == 6:
            examples.append(ExampleEntry(1, content))
        elif pos == 2:
            an_top.append(content)
        elif pos == 3:
            an_bottom.append(content)
        elif pos == 4:
            want_depth = 4 if e.depth is None else e.depth
            want_role = 0 if e.role is None else e.role
            found = by_depth.get((_strict_key(want_depth), _strict_key(want_role)))
            if found is not None:
                found["entries"].append(content)  # reversed below: an unshift
            else:
                group = {
                    "depth": e.depth,
                    "has_depth": e.has_depth,
                    "entries": [content],
                    "role": want_role,
                }
                depth_groups.append(group)
                by_depth.setdefault((_strict_key(e.depth), _strict_key(want_role)), group)
        elif pos == 7:
            name = e.outlet_name
            if not js_truthy(name):
                warnings.append(f"entry {e.key_id}: outlet position without a name")
                continue
            outlets.setdefault(js_string(name), []).append(content)
    timed.set_effects([entries[i] for i in order])
    # SillyTavern unshifts while walking descending order: reverse the appended lists.
    for lst in (before, after, examples, an_top, an_bottom):
        lst.reverse()
    return WorldInfoResult(
        before="\n".join(before),
        after="\n".join(after),
        examples=tuple(examples),
        depth=tuple(
            DepthGroup(g["depth"], g["role"], tuple(reversed(g["entries"])), g["has_depth"])
            for g in depth_groups
        ),
        an_top=tuple(an_top),
        an_bottom=tuple(an_bottom),
        outlets={k: tuple(outlets[k]) for k in js_key_order(outlets)},
        activated=tuple(_activated_entry(entries[i], i, content_of(i), cache) for i in order),
        timed_state=timed.state,
        overflowed=overflowed,
        loops=loops,
        warnings=tuple(warnings),
    )
