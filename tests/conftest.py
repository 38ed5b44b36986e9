"""Shared fixtures: an isolated data dir per test, and the folders under ../shared.

Tests that read ../shared take the folder from ``TAVERNKIT_CONFORMANCE_DIR`` or
``TAVERNKIT_WIRE_FIXTURES`` (default: ../shared/... beside the repo) and skip when it is absent,
so the suite passes on a fresh clone without it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def conformance_root() -> Path:
    """The conformance folder (may not exist)."""
    env = os.environ.get("TAVERNKIT_CONFORMANCE_DIR")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "conformance"


def wire_fixtures_root() -> Path:
    env = os.environ.get("TAVERNKIT_WIRE_FIXTURES")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "fixtures" / "wire"


@pytest.fixture
def st_default_data() -> Path:
    """SillyTavern's shipped default data (card, lorebook, presets); skips when absent."""
    path = conformance_root() / "data" / "st-1.18-default"
    if not path.is_dir():
        pytest.skip(f"SillyTavern default data not found at {path}")
    return path


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Every test gets its own TAVERNKIT_HOME, so nothing touches the user's data."""
    home = tmp_path_factory.mktemp("tavernkit-home")
    monkeypatch.setenv("TAVERNKIT_HOME", str(home))
    return home
