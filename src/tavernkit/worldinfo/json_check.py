"""Whether a world-info entry is JSON (str-keyed objects, arrays, strings, numbers, booleans,
null, at most 64 levels deep): an entry holding anything else is skipped when compiled."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain, compress, repeat
from operator import is_, methodcaller
from typing import Any

__all__ = ["STR_TYPE", "all_json", "is_json"]

_SCALARS = frozenset((str, bool, int, float, type(None)))
_JSONISH = _SCALARS | {list, dict}
_CONTAINERS = frozenset((list, dict))
_COPY = methodcaller("copy")  # list.copy / dict.copy: the level holds exact types only
STR_TYPE = frozenset((str,))
#: Containers nested deeper than this are not JSON here (SillyTavern's files never come close).
_MAX_DEPTH = 64


def all_json(entries: list[Any], keep: list[list[Any]] | None = None) -> bool:
    """Whether every entry is JSON made of exact builtin types, checked level by level with
    C-level iteration (``map``/``zip``/``compress``), not a Python call per value.
    ``False`` only means "check each entry" (:func:`is_json`).

    ``keep`` (when given) receives, level by level below the entries, a shallow copy of each
    container found: together they are a snapshot of everything nested in the entries, which
    :func:`all_json` of the same entries later reproduces (``==``) unless one was edited."""
    dicts: list[dict[Any, Any]] = []
    lists: list[list[Any]] = []
    if not _check_column(entries, dicts, lists, scalars=False):
        return False
    depth = 0
    while dicts or lists:
        if depth >= _MAX_DEPTH - 4:  # deep books take the exact per-entry check
            return False
        if keep is not None and depth:
            keep.append(list(map(_COPY, chain(dicts, lists))))
        # The set of all keys is small (entries share their field names): its types are cheap.
        if dicts and not STR_TYPE.issuperset(map(type, set().union(*dicts))):
            return False
        nested_dicts: list[dict[Any, Any]] = []
        nested_lists: list[list[Any]] = []
        for column in _columns(dicts, lists):
            if not _check_column(column, nested_dicts, nested_lists):
                return False
        dicts, lists = nested_dicts, nested_lists
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


def _check_column(
    column: Sequence[Any],
    dicts: list[dict[Any, Any]],
    lists: list[list[Any]],
    *,
    scalars: bool = True,
) -> bool:
    """Whether every value of ``column`` is JSON-typed (a container unless ``scalars``); its
    dicts and lists go to ``dicts`` and ``lists``."""
    if not column:
        return True
    kind = type(column[0])
    # One type: an identity test each (``is``, never ``==``: a metaclass may claim equality).
    if all(map(is_, map(type, column), repeat(kind))):
        if kind is dict:
            dicts.extend(column)
        elif kind is list:
            lists.extend(column)
        else:
            return scalars and kind in _SCALARS
        return True
    types = list(map(type, column))
    kinds = set(types)
    if not kinds <= (_JSONISH if scalars else _CONTAINERS):
        return False
    if dict in kinds:
        dicts.extend(compress(column, map(is_, types, repeat(dict))))
    if list in kinds:
        lists.extend(compress(column, map(is_, types, repeat(list))))
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
