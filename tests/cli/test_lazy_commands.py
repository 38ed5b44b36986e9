"""The top-level commands are stand-ins until one runs: ``tavernkit --help`` imports no engine,
and every stand-in's name and one-line help are the real command's."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from tavernkit.cli import COMMANDS, app
from tavernkit.cli.lazy import LazyCommand

_HELP_IMPORTS = (
    "import sys; sys.argv = ['tavernkit', '--help']\n"
    "from tavernkit.cli import main\n"
    "try:\n"
    "    main()\n"
    "except SystemExit:\n"
    "    pass\n"
    "heavy = ('tavernkit.facade', 'tavernkit.library', 'tavernkit.chat', 'tavernkit.formats',\n"
    "         'tavernkit.generation', 'tavernkit.prompt', 'tavernkit.store', 'pydantic',\n"
    # the terminal's line reader (and asyncio under it) is for a chat session, not for help
    "         'tavernkit.cli.line_input', 'asyncio')\n"
    "print(sorted(m for m in sys.modules if m in heavy))\n"
)


def test_help_imports_no_engine() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _HELP_IMPORTS], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
    for spec in COMMANDS:
        assert spec.name in done.stdout


@pytest.mark.parametrize("spec", COMMANDS, ids=lambda s: s.name)
def test_a_stand_in_says_what_the_real_command_says(spec: LazyCommand) -> None:
    real = spec.load()
    assert real.name == spec.name
    assert (real.help or "").strip().splitlines()[0] == spec.help


@pytest.mark.parametrize("spec", COMMANDS, ids=lambda s: s.name)
def test_every_command_answers_its_own_help(spec: LazyCommand) -> None:
    result = CliRunner().invoke(app, [spec.name, "--help"])
    assert result.exit_code == 0, result.output
    assert f"tavernkit {spec.name}" in result.output
    assert "--install-completion" not in result.output


def test_an_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(app, ["nosuch"])
    assert result.exit_code == 2
