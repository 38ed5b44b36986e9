"""Whether a world-info entry is JSON (str-keyed objects, arrays, strings, numbers, booleans,
null, at most 64 levels deep): an entry holding anything else is skipped when compiled."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain, compress
from operator import countOf, methodcaller
from typing import Any

__all__ = ["STR_TYPE", "all_json", "is_json"]

_SCALARS = frozenset((str, bool, int, float, type(None)))
_JSONISH = _SCALARS | {list, dict}
_CONTAINERS = frozenset((list, dict))
_DICT = frozenset((dict,))
_COPY = methodcaller("copy")  # list.copy / dict.copy: the level holds exact types only
_LIST = frozenset((list,))
STR_TYPE = frozenset((str,))
#: Containers nested deeper than this are not JSON here (SillyTavern's files never come close).
_MAX_DEPTH = 64


def all_json(entries: list[Any], keep: list[list[Any]] | None = None) -> bool:
    """Whether every entry is JSON made of exact builtin types, checked level by level with
    C-level iteration (``map``/``zip``/``compress``/``countOf``), not a Python call per value.
    ``False`` only means "check each entry" (:func:`is_json`).

    ``keep`` (when given) receives, level by level below the entries, a shallow copy of each
    container found: together they are a snapshot of everything nested in the entries, which
    :func:`all_json` of the same entries later reproduces (``==``) unless one was edited."""
    level = entries
    depth = 0
    while level:
        if depth >= _MAX_DEPTH - 4:  # deep books take the exact per-entry check
            return False
        shapes = set(map(type, level))
        dicts: list[dict[Any, Any]] = []
        lists: list[list[Any]] = []
        if shapes == _DICT:
            dicts = level
        elif shapes == _LIST:
            lists = level
        elif shapes <= _CONTAINERS:
            for c in level:
                (dicts if c.__class__ is dict else lists).append(c)
        else:
            return False
        if keep is not None and depth:
            keep.append(list(map(_COPY, level)))
        # The set of all keys is small (entries share their field names): its types are cheap.
        if dicts and not STR_TYPE.issuperset(map(type, set().union(*dicts))):
            return False
        nested: list[Any] = []
        for column in _columns(dicts, lists):
            if not _check_column(column, nested):
                return False
        level = nested
        depth += 1
    return True


def _columns(dicts: list[dict[Any, Any]], lists: list[list[Any]]) -> list[Sequence[Any]]:
    """The values of a level in groups: dicts of one size (a book's entries share their
    fields, mostly in one order) field by field, so that most groups hold one type."""
    columns: list[Sequence[Any]] = []
    if dicts:
        if len(set(map(len, dicts))) == 1:
            columns.extend(zip(*map(dict.values, dicts), strict=True))
        else:
            columns.append(list(chain.from_iterable(map(dict.values, dicts))))
    if lists:
        columns.append(list(chain.from_iterable(lists)))
    return columns


def _check_column(column: Sequence[Any], nested: list[Any]) -> bool:
    """Whether every value of ``column`` is JSON-typed; its containers go to ``nested``."""
    if not column:
        return True
    kind = type(column[0])
    if countOf(map(type, column), kind) == len(column):  # one type: a pointer compare each
        if kind in _CONTAINERS:
            nested.extend(column)
            return True
        return kind in _SCALARS
    types = list(map(type, column))
    kinds = set(types)
    if not kinds <= _JSONISH:
        return False
    if not kinds.isdisjoint(_CONTAINERS):
        nested.extend(compress(column, map(_CONTAINERS.__contains__, types)))
    return True


def is_json(value: Any, depth: int = 0) -> bool:
    if type(value) in _SCALARS:  # the common case, without isinstance chains
        return True
    if depth > _MAX_DEPTH:
        return False
    if isinstance(value, str | bool | int | float):
        return True
    # Plain loops, not all() over a generator: this walks every value of every entry.
    scalars = _SCALARS
    if isinstance(value, list):
        if depth >= _MAX_DEPTH:
            return not value  # any child would be deeper than 64 levels
        for v in value:  # noqa: SIM110 - a loop, see above
            if type(v) not in scalars and not is_json(v, depth + 1):
                return False
        return True
    if isinstance(value, Mapping):
        if depth >= _MAX_DEPTH:
            return not value
        for k, v in value.items():
            if not isinstance(k, str) or (type(v) not in scalars and not is_json(v, depth + 1)):
                return False
        return True
    return False
