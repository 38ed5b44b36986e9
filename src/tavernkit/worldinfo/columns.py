"""Compile a plain book column by column, at C speed.

A big book is almost always uniform: string contents without decorators, lists of string
keys, integer uids and orders, boolean flags. Each field is read for every entry at once
(``map(dict.get, wires, repeat(field))``) and its column is coerced with one C-level pass when
its types allow it, falling back to the per-value coercion of :mod:`~tavernkit.worldinfo.
compile` for that column only. A book any entry of which would be skipped or warned about is
not plain: :func:`compile_plain` returns ``None`` and the entries are compiled one by one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import chain, repeat
from operator import add, countOf
from typing import Any

from tavernkit.jscompat import js_loose_true, js_to_number, js_truthy
from tavernkit.worldinfo.entry import MATCH_FLAGS, CompiledEntry, new_entry, opt_bool

__all__ = ["compile_plain"]

_STR = frozenset((str,))
_LIST = frozenset((list,))
_INT = frozenset((int,))
_BOOL = frozenset((bool,))
_OPT_BOOL: frozenset[type] = frozenset((bool, type(None)))


def _column(wires: list[dict[str, Any]], name: str) -> list[Any]:
    return list(map(dict.get, wires, repeat(name)))


def _coerce(values: list[Any], fast: frozenset[type], fn: Callable[[Any], Any]) -> list[Any]:
    """``values`` themselves when every type is in ``fast`` (already what ``fn`` returns),
    else ``fn`` of each."""
    if fast.issuperset(map(type, values)):
        return values
    return list(map(fn, values))


def _order(value: Any) -> float:
    order = js_to_number(value)
    return 0.0 if math.isnan(order) else order


def _delay_level(value: Any) -> float:
    if value is True:
        return 1.0
    if not js_truthy(value):
        return 0.0
    level = js_to_number(value)
    return 0.0 if math.isnan(level) else level


def compile_plain(
    name: str,
    wires: list[dict[str, Any]],
    *,
    max_keys: int,
    max_key_chars: int,
    max_content_chars: int,
) -> list[CompiledEntry] | None:
    """The compiled entries of ``wires`` (exact dicts, JSON, in SillyTavern's order), the same
    as compiling each, or ``None`` when some entry needs the per-entry path: a content that is
    not a string or starts with ``@@``, keys that are not lists of strings, absurd key lists or
    contents, a uid that is not an integer, a group, or two entries with the same uid."""
    n = len(wires)
    contents = _column(wires, "content")
    keys = _column(wires, "key")
    secondary = _column(wires, "keysecondary")
    uids = _column(wires, "uid")
    groups = _column(wires, "group")
    if not (
        _STR.issuperset(map(type, contents))
        and _LIST.issuperset(map(type, keys))
        and _LIST.issuperset(map(type, secondary))
        and _INT.issuperset(map(type, uids))
        and countOf(groups, None) + countOf(groups, "") == n
    ):
        return None
    all_keys = list(chain(chain.from_iterable(keys), chain.from_iterable(secondary)))
    if (
        not _STR.issuperset(map(type, all_keys))
        or max(map(len, all_keys), default=0) > max_key_chars
        or max(map(add, map(len, keys), map(len, secondary)), default=0) > max_keys
        or max(map(len, contents), default=0) > max_content_chars
        or any(map(str.startswith, contents, repeat("@@")))
        or (uids and (max(uids) >= 10**21 or min(uids) <= -(10**21)))
    ):
        return None
    prefix = name + "."
    key_ids = list(map(prefix.__add__, map(str, uids)))  # JS prints these integers the same
    if len(set(key_ids)) != n:
        return None  # duplicate uids: the per-entry path names them
    orders = _column(wires, "order")
    orders = (
        list(map(float, orders))
        if _INT.issuperset(map(type, orders))
        else [_order(v) for v in orders]
    )
    delays = _column(wires, "delayUntilRecursion")
    if countOf(delays, None) + countOf(delays, False) == n:  # ``0 == False``: counts 0 too
        levels: list[float] = [0.0] * n
    else:
        levels = [_delay_level(v) for v in delays]
    constants = _coerce(_column(wires, "constant"), _BOOL, js_truthy)
    disables = _coerce(_column(wires, "disable"), _BOOL, js_loose_true)
    cases = _coerce(_column(wires, "caseSensitive"), _OPT_BOOL, opt_bool)
    wholes = _coerce(_column(wires, "matchWholeWords"), _OPT_BOOL, opt_bool)
    masks = [0] * n
    for flag, bit in MATCH_FLAGS:
        column = _column(wires, flag)
        if countOf(column, None) + countOf(column, False) == n:
            continue  # off everywhere: null, false or 0 (``0 == False``)
        for i, v in enumerate(column):
            if js_truthy(v):
                masks[i] |= 1 << bit
    scan_depths = _column(wires, "scanDepth")
    delay_values = _column(wires, "delay")
    out: list[CompiledEntry] = []
    append = out.append
    for wire, content, key, sec, uid, key_id, order, level, const, dis, cs, ww, mask, sd, dl in zip(
        wires,
        contents,
        map(tuple, keys),
        map(tuple, secondary),
        uids,
        key_ids,
        orders,
        levels,
        constants,
        disables,
        cases,
        wholes,
        masks,
        scan_depths,
        delay_values,
        strict=True,
    ):
        e: CompiledEntry = new_entry(CompiledEntry)
        e.world = name
        e.uid = uid
        e.key_id = key_id
        e.wire = wire
        e.content = content
        e.output_content = content
        e.decorators = ()
        e.keys = key
        e.secondary = sec
        e.constant = const
        e.disable = dis
        e.order = order
        e.group = ""
        e.group_names = ()
        e.scan_depth = sd
        e.case_sensitive = cs
        e.match_whole_words = ww
        e.match_mask = mask
        e.delay_until_recursion = level
        e.delay = dl
        e._hash = None
        append(e)
    return out
