"""The house's layers, checked by import-linter: the contracts in ``pyproject.toml``
(``[tool.importlinter]``) must all be kept. Run alone: ``lint-imports``.

The linter runs in a fresh interpreter on this tree's ``src`` (it reads the import graph with
grimp, and puts the working folder on ``sys.path``)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import importlinter  # noqa: F401  # the test extra installs it; CI must not skip this check

ROOT = Path(__file__).resolve().parents[1]

_RUN = (
    "import sys\n"
    "from importlinter.cli import lint_imports\n"
    "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))\n"
)


def _lint(config: Path) -> subprocess.CompletedProcess[str]:
    paths = [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    return subprocess.run(
        [sys.executable, "-c", _RUN, str(config)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
        timeout=300,
    )


def test_every_layer_contract_is_kept() -> None:
    done = _lint(ROOT / "pyproject.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_the_contracts_cover_the_layers_and_the_cycles() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = {c["id"]: c["type"] for c in config["tool"]["importlinter"]["contracts"]}
    assert contracts == {
        "layers": "layers",
        "faces-on-top": "forbidden",
        "providers-leaf": "forbidden",
        "tools-below-generation": "forbidden",
        "pure-no-storage": "forbidden",
        "pure-no-network": "forbidden",
        "prompt-no-direct-network": "forbidden",
        "no-package-cycles": "acyclic_siblings",
        "private-modules": "private_modules",
    }


def test_a_broken_contract_fails_the_run(tmp_path: Path) -> None:
    # the check itself: a contract the code breaks (errors imports its families) is reported
    config = tmp_path / "broken.toml"
    config.write_text(
        "[tool.importlinter]\n"
        'root_package = "tavernkit"\n'
        "[[tool.importlinter.contracts]]\n"
        'name = "errors imports nothing"\n'
        'type = "forbidden"\n'
        'source_modules = ["tavernkit.errors"]\n'
        'forbidden_modules = ["tavernkit.error_families"]\n',
        encoding="utf-8",
    )
    done = _lint(config)
    assert done.returncode != 0
    assert "BROKEN" in done.stdout
