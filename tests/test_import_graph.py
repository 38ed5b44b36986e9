"""The house's import rules, read from the source (``ast``) and checked in fresh interpreters
(the layers between packages, and that nothing below the facade imports it, are import-linter's
contracts: ``tests/test_layers.py``).

- every module imports on its own, in any order (no module works only because another one
  happened to be imported first);
- no cycle among module-level runtime imports, and none even when the ``if TYPE_CHECKING:``
  imports are counted (a type-only circle is still a circle a reader must untangle), but the
  macro catalogue's, listed in ``_TYPE_ONLY_BACK_EDGES`` with its reason;
- no function-level imports, except of optional dependencies (the embedded model, the
  embedder) and in the modules of ``_DEFERRING``, each with its reason; their deferred imports
  count as runtime edges in the cycle checks, so the graph still sees them, and each says why
  (a comment on it or just above it).
"""

from __future__ import annotations

import ast
import random
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

#: third-party packages that are optional extras (``local``, ``embed``): imported where they are
#: used, so the core installs and imports without them
_OPTIONAL = frozenset(
    {"xllamacpp", "onnxruntime", "tokenizers", "numpy", "fastapi", "starlette", "uvicorn"}
    | {"multipart", "argon2", "asyncpg", "redis", "mcp"}
)


#: modules that import parts of tavernkit inside functions, each with why (this list only
#: shrinks)
_DEFERRING: dict[str, str] = {
    "tavernkit.facade": "``from tavernkit import Tavern`` is the floor of every CLI command "
    "(issue 40: 1.5 s): the engine below is imported when a Tavern is made and opened",
}


#: type-only imports that close a circle, each with why (this list only shrinks). The macro
#: catalogue's: a macro handler (``registry.MacroCall``, ``shorthand``) is typed with the
#: evaluator's ``Evaluation`` it is called with, while the evaluator runs the registry's
#: handlers; at runtime the circle is open.
_TYPE_ONLY_BACK_EDGES: dict[tuple[str, str], str] = {
    ("tavernkit.text.macros.registry", "tavernkit.text.macros.evaluator"): "macro catalogue",
    ("tavernkit.text.macros.shorthand", "tavernkit.text.macros.evaluator"): "macro catalogue",
}


@dataclass
class _Module:
    name: str
    path: Path
    is_package: bool
    runtime: set[str] = field(default_factory=set)
    type_only: set[str] = field(default_factory=set)
    #: (function name, line, imported module)
    in_functions: list[tuple[str, int, str]] = field(default_factory=list)


def _scan() -> dict[str, _Module]:
    modules: dict[str, _Module] = {}
    for path in sorted((SRC / "tavernkit").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        modules[".".join(parts)] = _Module(".".join(parts), path, is_package)
    for module in modules.values():
        tree = ast.parse(module.path.read_text(encoding="utf-8"))
        _walk_body(module, modules, tree.body, type_only=False)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Import | ast.ImportFrom):
                        for target in _targets(module, modules, inner):
                            module.in_functions.append((node.name, inner.lineno, target))
    return modules


def _walk_body(
    module: _Module, modules: dict[str, _Module], body: list[ast.stmt], *, type_only: bool
) -> None:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            into = module.type_only if type_only else module.runtime
            into.update(t for t in _targets(module, modules, node) if t in modules)
        elif isinstance(node, ast.If):
            checking = "TYPE_CHECKING" in ast.unparse(node.test)
            _walk_body(module, modules, node.body, type_only=type_only or checking)
            _walk_body(module, modules, node.orelse, type_only=type_only)
        elif isinstance(node, ast.Try):
            for part in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                _walk_body(module, modules, part, type_only=type_only)


def _targets(module: _Module, modules: dict[str, _Module], node: ast.stmt) -> list[str]:
    """The modules an import statement loads: ``from a import b`` is ``a`` (its
    ``__init__`` runs first, whatever is imported from it) and also ``a.b`` when that is a
    module."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        base = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join([*base, *([node.module] if node.module else [])])
    else:
        prefix = node.module or ""
    out = [prefix]
    for alias in node.names:
        candidate = f"{prefix}.{alias.name}"
        if candidate in modules:
            out.append(candidate)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


MODULES = _scan()


def test_the_scan_sees_the_whole_package() -> None:
    # a guard for the checks below: a scan that found nothing would pass them all
    assert len(MODULES) > 150
    assert "tavernkit.facade" in MODULES["tavernkit.cli._common"].runtime | set().union(
        *(m.runtime | m.type_only for m in MODULES.values() if m.name.startswith("tavernkit.cli"))
    )
    assert any(m.type_only for m in MODULES.values())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_module_imports_in_a_fresh_interpreter_in_any_order(seed: int) -> None:
    names = sorted(MODULES)
    random.Random(seed).shuffle(names)
    code = (
        "import importlib, sys\n"
        "failed = []\n"
        f"for name in {names!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as exc:\n"
        "        failed.append(f'{name}: {type(exc).__name__}: {exc}')\n"
        "print('\\n'.join(failed))\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(SRC), "PATH": ""},
    )
    assert done.stdout.strip() == "", done.stdout


def _runtime_edges(m: _Module) -> set[str]:
    """What ``m`` imports when it runs: at module level, and in its functions when it defers."""
    if m.name not in _DEFERRING:
        return m.runtime
    return m.runtime | {t for _, _, t in m.in_functions if t in MODULES}


def test_no_cycle_among_module_level_runtime_imports() -> None:
    assert _cycles({name: _runtime_edges(m) for name, m in MODULES.items()}) == []


def test_no_cycle_even_counting_type_checking_imports() -> None:
    graph = {
        name: _runtime_edges(m) | {t for t in m.type_only if (name, t) not in _TYPE_ONLY_BACK_EDGES}
        for name, m in MODULES.items()
    }
    assert _cycles(graph) == []
    for where, what in _TYPE_ONLY_BACK_EDGES:
        assert what in MODULES[where].type_only  # an exception that no longer applies goes


def test_no_function_level_imports_but_optional_dependencies() -> None:
    found = sorted(
        f"{name}:{line} ({function}) imports {target}"
        for name, m in MODULES.items()
        for function, line, target in m.in_functions
        if target.split(".")[0] not in _OPTIONAL and name not in _DEFERRING
    )
    assert found == []
    for name in _DEFERRING:  # an exception that no longer applies goes
        assert MODULES[name].in_functions


def _unexplained_deferred(source: str) -> list[int]:
    """The lines of the function-level imports in ``source`` that say nowhere why they are
    deferred: neither a comment on one of a run's lines (consecutive import statements) nor
    a comment line just above the run."""
    lines = source.splitlines()
    found: list[int] = []
    for func in ast.walk(ast.parse(source)):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            for body in (getattr(node, name, None) for name in ("body", "orelse", "finalbody")):
                run: list[ast.stmt] = []
                for stmt in [*(body if isinstance(body, list) else []), None]:
                    if isinstance(stmt, ast.Import | ast.ImportFrom):
                        run.append(stmt)
                        continue
                    if run and not _says_why(lines, run):
                        found.append(run[0].lineno)
                    run = []
    return sorted(set(found))


def _says_why(lines: list[str], run: list[ast.stmt]) -> bool:
    assert run[-1].end_lineno is not None
    if any("#" in lines[i - 1] for i in range(run[0].lineno, run[-1].end_lineno + 1)):
        return True
    above = run[0].lineno - 2
    while above >= 0 and not lines[above].strip():
        above -= 1
    return above >= 0 and lines[above].strip().startswith("#")


def test_each_function_level_import_says_why() -> None:
    unexplained = sorted(
        f"{name}:{line}"
        for name, m in MODULES.items()
        for line in _unexplained_deferred(m.path.read_text(encoding="utf-8"))
    )
    assert unexplained == []


def test_the_why_check_finds_a_silent_deferred_import() -> None:
    source = (
        "def a():\n"
        "    import numpy  # optional extra\n"
        "def b():\n"
        "    # cost: imported on use\n"
        "    import json\n\n"
        "    import numpy\n"
        "def c():\n"
        "    x = 1\n"
        "    import json\n"
        "    if x:\n"
        "        from os import path\n"
    )
    assert _unexplained_deferred(source) == [10, 12]


def test_the_cycle_check_finds_a_cycle() -> None:
    # the checker itself, on a made-up graph: a -> b -> c -> a, and d alone
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_from_a_package_import_a_submodule_is_an_edge_to_both() -> None:
    # ``from pkg import sibling`` runs ``pkg/__init__`` before it reads ``sibling``: both are
    # loaded, so a face that (even type-only) imports its importer closes a circle
    module = MODULES["tavernkit.chat.prepare"]
    statement = ast.parse("from tavernkit.prompt import pipeline, PromptTarget").body[0]
    assert _targets(module, MODULES, statement) == ["tavernkit.prompt", "tavernkit.prompt.pipeline"]
    relative = ast.parse("from . import prepare").body[0]
    assert _targets(MODULES["tavernkit.chat.service"], MODULES, relative) == [
        "tavernkit.chat",
        "tavernkit.chat.prepare",
    ]
    # a name imported from a module is an edge to that module alone
    plain = ast.parse("from tavernkit.prompt.pipeline import prepare").body[0]
    assert _targets(module, MODULES, plain) == ["tavernkit.prompt.pipeline"]
