"""The shape of the house, counted from the source: each class name defined once, and ceilings
on long functions and on functions with many parameters (they may only fall: lower a ceiling
when a refactor brings a count under it).

A name defined twice makes a reader (and a traceback) guess which one is meant; a function of
ten parameters or eighty lines is one nobody changes without fear."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "tavernkit"

#: functions of ten or more parameters (``self``/``cls`` not counted), at most
MANY_PARAMETERS_CEILING = 1
#: functions over 80 lines, at most
LONG_FUNCTIONS_CEILING = 10


def _trees() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        yield str(path.relative_to(SRC.parent)), ast.parse(path.read_text(encoding="utf-8"))


def _functions() -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for where, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield where, node


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = node.args
    count = len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs)
    if args.args and args.args[0].arg in ("self", "cls"):
        count -= 1
    return count


def _length(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    assert node.end_lineno is not None
    return node.end_lineno - node.lineno + 1


def test_each_class_name_is_defined_once() -> None:
    places: dict[str, list[str]] = defaultdict(list)
    for where, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                places[node.name].append(where)
    twice = {name: where for name, where in places.items() if len(where) > 1}
    assert not twice, f"class names defined more than once: {twice}"


def test_functions_with_many_parameters_stay_under_the_ceiling() -> None:
    many = sorted(
        (_parameters(node), f"{where}:{node.name}")
        for where, node in _functions()
        if _parameters(node) >= 10
    )
    assert len(many) <= MANY_PARAMETERS_CEILING, (
        f"{len(many)} functions take ten or more parameters (ceiling "
        f"{MANY_PARAMETERS_CEILING}); gather them into a value: {many[-5:]}"
    )


def test_long_functions_stay_under_the_ceiling() -> None:
    long = sorted(
        (_length(node), f"{where}:{node.name}")
        for where, node in _functions()
        if _length(node) > 80
    )
    assert len(long) <= LONG_FUNCTIONS_CEILING, (
        f"{len(long)} functions are over 80 lines (ceiling {LONG_FUNCTIONS_CEILING}); "
        f"split them into named steps: {long[-5:]}"
    )
