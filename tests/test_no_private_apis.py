"""No other package's private API under ``src/`` and no generated code, read from the source
(``ast``): an upgrade of a dependency within our version ranges keeps its public names, not its
private modules (``x._y``) or private names (``from x import _y``), so leaning on those can
break a fresh install. ``exec`` (code generated at run time) is refused too: what it builds is
read by no linter, type checker or reviewer."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "tavernkit"


def _private(dotted: str) -> bool:
    """Whether a dotted name has a private part (``_y``, not ``__future__``-style dunders)."""
    return any(p.startswith("_") and not p.endswith("__") for p in dotted.split("."))


def private_imports(source: str, where: str) -> list[str]:
    """``where:line module`` for each import of another package's private module or name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue  # a relative import stays inside tavernkit
        for name in names:
            if name.split(".")[0] != "tavernkit" and _private(name):
                found.append(f"{where}:{node.lineno} {name}")
    return found


#: underscored names a library documents as public (the standard library's ``os._exit``)
_DOCUMENTED = {"os._exit"}


def _foreign(module: str | None) -> bool:
    return bool(module) and str(module).split(".", 1)[0] != "tavernkit"


def _foreign_names(tree: ast.AST) -> set[str]:
    """The names a module binds to another package's modules or objects (``import x``,
    ``import x.y as z``, ``from x import Y``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "tavernkit":
                    names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _foreign(node.module):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def private_attributes(source: str, where: str) -> list[str]:
    """``where:line a.b._c`` for each private attribute read through a name bound to another
    package (``aiosqlite.Connection._execute``): its internals, as a private module is."""
    tree = ast.parse(source)
    foreign = _foreign_names(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)):
            continue
        root: ast.expr = node.value
        chain = [node.attr]
        while isinstance(root, ast.Attribute):
            chain.append(root.attr)
            root = root.value
        if not (isinstance(root, ast.Name) and root.id in foreign):
            continue
        dotted = ".".join([root.id, *reversed(chain)])
        if dotted not in _DOCUMENTED:
            found.append(f"{where}:{node.lineno} {dotted}")
    return found


def exec_calls(source: str, where: str) -> list[str]:
    """``where:line`` for each call of ``exec`` (a bare name or ``builtins.exec``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name == "exec":
                found.append(f"{where}:{node.lineno}")
    return found


def _sources() -> list[tuple[str, str]]:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 150  # a scan that found nothing would pass
    return [(str(p.relative_to(PACKAGE.parent)), p.read_text(encoding="utf-8")) for p in files]


def test_no_module_imports_another_packages_private_module_or_name() -> None:
    found = [hit for where, text in _sources() for hit in private_imports(text, where)]
    assert found == []


def test_no_module_reads_another_packages_private_attributes() -> None:
    found = [hit for where, text in _sources() for hit in private_attributes(text, where)]
    assert found == []


def test_no_module_calls_exec() -> None:
    found = [hit for where, text in _sources() for hit in exec_calls(text, where)]
    assert found == []


def test_the_scan_finds_what_it_refuses() -> None:
    source = (
        "import httpcore2._backends.base\n"
        "from httpcore2._utils import is_socket_readable\n"
        "from pydantic import _internal\n"
        "from tavernkit.models.base import WireModel\n"  # our own: allowed
        "from __future__ import annotations\n"
        "from . import _sibling\n"
        "exec('x = 1', {})\n"
        "builtins.exec('y = 2')\n"
        "executor.submit(print)\n"
    )
    assert private_imports(source, "m.py") == [
        "m.py:1 httpcore2._backends.base",
        "m.py:2 httpcore2._utils",
        "m.py:2 httpcore2._utils.is_socket_readable",
        "m.py:3 pydantic._internal",
    ]
    assert exec_calls(source, "m.py") == ["m.py:7", "m.py:8"]


def test_the_attribute_scan_finds_what_it_refuses() -> None:
    source = (
        "import aiosqlite\n"
        "from uvicorn.protocols import http as proto\n"
        "from tavernkit.store import sqlite\n"
        "real = aiosqlite.Connection._execute\n"
        "proto.H11Protocol._unset_keepalive_if_required(None)\n"
        "sqlite.SqliteStore._read\n"  # our own: allowed
        "self._conn.run\n"  # our own attribute
        "aiosqlite.Connection.__init__\n"  # a dunder is public
    )
    assert private_attributes(source, "m.py") == [
        "m.py:4 aiosqlite.Connection._execute",
        "m.py:5 proto.H11Protocol._unset_keepalive_if_required",
    ]
