"""``tavernkit rotate-secret-key``: every stored API key sealed again under a new secret key
in one go; a wrong current key changes nothing and says so (issue 37)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tavernkit.cli import app
from tavernkit.store.paths import DB_FILE_NAME
from tavernkit.store.secret_key import GENERATED_KEY_FILE, SECRET_KEY_ENV, SECRET_KEY_FILE_ENV
from tavernkit.store.sqlite import open_store

SECRET = "sk-rotate-Q9g8h7j6k5m4n3p2ZYX"
NEW_KEY = "new-kek-Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0"


async def _add_keys(home: Path) -> list[str]:
    async with await open_store(home / DB_FILE_NAME) as store:
        return [await store.add_api_key("openai", f"{SECRET}{n}") for n in range(2)]


async def _secrets(home: Path, ids: list[str]) -> list[str]:
    async with await open_store(home / DB_FILE_NAME) as store:
        return [await store.get_api_key_secret(i) for i in ids]


def test_a_single_host_rotates_to_a_new_key_and_keeps_its_keys(tmp_path: Path) -> None:
    home = Path(os.environ["TAVERNKIT_HOME"])  # each test's own (conftest); the key's too
    ids = asyncio.run(_add_keys(home))
    old_text = (home / GENERATED_KEY_FILE).read_text()
    new_file = tmp_path / "new.key"
    new_file.write_text(NEW_KEY + "\n")
    done = CliRunner().invoke(app, ["rotate-secret-key", "--new-key-file", str(new_file)])
    assert done.exit_code == 0, done.output
    assert "3 sealed secrets" in done.output  # two keys and the fingerprint secret
    assert (home / GENERATED_KEY_FILE).read_text() == NEW_KEY != old_text
    assert asyncio.run(_secrets(home, ids)) == [f"{SECRET}0", f"{SECRET}1"]


def test_a_wrong_current_key_changes_nothing_and_leaks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = Path(os.environ["TAVERNKIT_HOME"])
    ids = asyncio.run(_add_keys(home))
    wrong = tmp_path / "wrong.key"
    wrong.write_text("w" * 40)
    new_file = tmp_path / "new.key"
    new_file.write_text(NEW_KEY)
    monkeypatch.setenv(SECRET_KEY_FILE_ENV, "")  # the command sets it: undone after the test
    done = CliRunner().invoke(
        app,
        ["rotate-secret-key", "--new-key-file", str(new_file), "--secret-key-file", str(wrong)],
        env={SECRET_KEY_ENV: ""},
    )
    assert done.exit_code != 0
    assert "nothing was changed" in done.output
    assert SECRET not in done.output and str(tmp_path) not in done.output
    monkeypatch.delenv(SECRET_KEY_FILE_ENV)
    assert asyncio.run(_secrets(home, ids)) == [f"{SECRET}0", f"{SECRET}1"]


def test_serve_refuses_an_unusable_secret_key_before_it_listens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_KEY_FILE_ENV, "")  # serve sets it from the option: undone after
    missing = tmp_path / "nowhere" / "secret.key"
    done = CliRunner().invoke(app, ["serve", "--port", "0", "--secret-key-file", str(missing)])
    assert done.exit_code != 0
    assert "cannot be read" in done.output and str(missing) not in done.output
    monkeypatch.delenv(SECRET_KEY_FILE_ENV)
    monkeypatch.setenv(SECRET_KEY_ENV, "too-short")
    done = CliRunner().invoke(app, ["serve", "--port", "0"])
    assert done.exit_code != 0 and "at least 32 characters" in done.output
