"""``tavernkit rotate-secret-key``: every stored API key sealed again under a new secret key
in one go; a wrong current key changes nothing and says so; a rolling rotation seals again
under the current key what the previous one sealed (issue 37)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tavernkit.cli import app
from tavernkit.errors import SecretKeyError
from tavernkit.store.paths import DB_FILE_NAME
from tavernkit.store.secret_key import (
    GENERATED_KEY_FILE,
    PREVIOUS_SECRET_KEY_ENV,
    PREVIOUS_SECRET_KEY_FILE_ENV,
    SECRET_KEY_ENV,
    SECRET_KEY_FILE_ENV,
)
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


OLD_KEY = "old-kek-YmF6cXV4Zm9vYmFycXV1eGdyYXVsdGNvcmdl"


async def _add_keys_under(home: Path, env: dict[str, str]) -> list[str]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        return await _add_keys(home)


async def _secrets_under(home: Path, ids: list[str], env: dict[str, str]) -> list[str]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        return await _secrets(home, ids)


def test_a_rolling_rotation_seals_again_under_the_current_key_what_the_previous_sealed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = Path(os.environ["TAVERNKIT_HOME"])
    ids = asyncio.run(_add_keys_under(home, {SECRET_KEY_ENV: OLD_KEY}))
    old_file = tmp_path / "old.key"
    old_file.write_text(OLD_KEY + "\n")
    monkeypatch.setenv(PREVIOUS_SECRET_KEY_FILE_ENV, "")  # the command sets it: undone after
    done = CliRunner().invoke(
        app,
        ["rotate-secret-key", "--previous-secret-key-file", str(old_file)],
        env={SECRET_KEY_ENV: NEW_KEY},
    )
    assert done.exit_code == 0, done.output
    assert "3 sealed secrets" in done.output and "current key" in done.output
    monkeypatch.delenv(PREVIOUS_SECRET_KEY_FILE_ENV)
    # the old key may go: the new one alone opens every key
    assert asyncio.run(_secrets_under(home, ids, {SECRET_KEY_ENV: NEW_KEY})) == [
        f"{SECRET}0",
        f"{SECRET}1",
    ]
    with pytest.raises(SecretKeyError):
        asyncio.run(_secrets_under(home, ids, {SECRET_KEY_ENV: OLD_KEY}))
    # run again (given the previous key in the environment): nothing left to seal
    done = CliRunner().invoke(
        app, ["rotate-secret-key"], env={SECRET_KEY_ENV: NEW_KEY, PREVIOUS_SECRET_KEY_ENV: OLD_KEY}
    )
    assert done.exit_code == 0 and "0 sealed secrets" in done.output, done.output


def test_a_rotation_with_neither_a_new_nor_a_previous_key_is_refused(
    tmp_path: Path,
) -> None:
    home = Path(os.environ["TAVERNKIT_HOME"])
    ids = asyncio.run(_add_keys_under(home, {SECRET_KEY_ENV: OLD_KEY}))
    done = CliRunner().invoke(app, ["rotate-secret-key"], env={SECRET_KEY_ENV: OLD_KEY})
    assert done.exit_code != 0 and "nothing to rotate to" in done.output
    assert OLD_KEY not in done.output
    assert len(asyncio.run(_secrets_under(home, ids, {SECRET_KEY_ENV: OLD_KEY}))) == 2


def test_serve_refuses_an_unusable_previous_key_before_it_listens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PREVIOUS_SECRET_KEY_FILE_ENV, "")  # serve sets it from the option
    missing = tmp_path / "nowhere" / "old.key"
    done = CliRunner().invoke(
        app,
        ["serve", "--port", "0", "--previous-secret-key-file", str(missing)],
        env={SECRET_KEY_ENV: NEW_KEY},
    )
    assert done.exit_code != 0
    assert "cannot be read" in done.output and str(missing) not in done.output
    monkeypatch.delenv(PREVIOUS_SECRET_KEY_FILE_ENV)
    done = CliRunner().invoke(
        app, ["serve", "--port", "0"], env={PREVIOUS_SECRET_KEY_ENV: OLD_KEY, SECRET_KEY_ENV: ""}
    )
    assert done.exit_code != 0 and "without a current one" in done.output
