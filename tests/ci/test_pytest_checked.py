""".ci/pytest_checked: a pytest run counts only when it is whole.

Each case runs the real script on a small test file of its own, in a folder of its own (no
repository configuration), and reads its exit status and its verdict."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "pytest_checked"

CLEAN = """
def test_one():
    assert 1 + 1 == 2

def test_two():
    assert "a".upper() == "A"

def test_three():
    pass
"""


def run_checked(folder: Path, source: str) -> subprocess.CompletedProcess[str]:
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (folder / "test_sample.py").write_text(source, encoding="utf-8")
    env = {**os.environ, "PYTEST_PYTHON": sys.executable}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "-q", "-p", "no:cacheprovider", "test_sample.py"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_clean_run_passes(tmp_path: Path) -> None:
    result = run_checked(tmp_path, CLEAN)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout
    assert "all 3 collected tests accounted for" in result.stdout


def test_a_process_ending_with_status_0_mid_session_fails(tmp_path: Path) -> None:
    source = CLEAN.replace('assert "a".upper() == "A"', "import os\n    os._exit(0)")
    result = run_checked(tmp_path, source)
    assert result.returncode != 0
    assert "ended before its session finished" in result.stderr
    # pytest alone calls the same run a success: the guard exists for exactly this
    plain = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_sample.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plain.returncode == 0
    assert "passed" not in plain.stdout


def test_a_session_stopped_early_with_status_0_fails(tmp_path: Path) -> None:
    source = CLEAN.replace(
        'assert "a".upper() == "A"', 'import pytest\n    pytest.exit("enough", returncode=0)'
    )
    result = run_checked(tmp_path, source)
    assert result.returncode != 0
    assert "only 1 of 3 collected tests ran to the end" in result.stderr


def test_a_run_that_collects_nothing_fails(tmp_path: Path) -> None:
    result = run_checked(tmp_path, "# no tests here\n")
    assert result.returncode == 5
    assert "pytest exited 5" in result.stderr


@pytest.mark.parametrize("body", ["assert False", "raise RuntimeError('boom')"])
def test_a_failing_test_fails(tmp_path: Path, body: str) -> None:
    result = run_checked(tmp_path, CLEAN.replace("pass", body))
    assert result.returncode == 1
    assert "pytest exited 1" in result.stderr
