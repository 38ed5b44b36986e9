"""``tavernkit profile``: key pools, fallback chains and timeouts from the command line, and the
same through ``Tavern.profiles``; nothing shown or stored in the database is a secret."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tavernkit.cli import app
from tavernkit.errors import Conflict, FormatError, NotFound
from tavernkit.facade import Tavern
from tavernkit.models.profile import ConnectionProfile, FallbackEntry, ProfileTimeouts
from tavernkit.store import open_store

runner = CliRunner()
SECRET_A = "sk-alpha-0123456789abcdef"
SECRET_B = "sk-bravo-0123456789abcdef"


def cli(*args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), input=input)


def home() -> Path:
    return Path(os.environ["TAVERNKIT_HOME"])


def stored(name: str) -> ConnectionProfile:
    async def load() -> ConnectionProfile:
        async with Tavern(home(), load_plugins=False) as tk:
            return await tk.profiles.get(name)

    return asyncio.run(load())


def sealed_secrets() -> dict[str, str]:
    """Key id -> the secret its row holds, opened with this host's secret key."""

    async def load() -> dict[str, str]:
        async with await open_store(home() / "tavernkit.db") as store:
            return {k.id: await store.get_api_key_secret(k.id) for k in await store.list_api_keys()}

    return asyncio.run(load())


def db_bytes() -> bytes:
    db = home() / "tavernkit.db"
    return b"".join(p.read_bytes() for p in (db, db.with_name(db.name + "-wal")) if p.exists())


def test_add_a_pool_of_keys_and_list_it_without_a_secret() -> None:
    result = cli(
        "profile", "add", "gpt", "-m", "gpt-4o",
        "--key", SECRET_A, "--key", "env:OPENAI_KEY_2", "--key", "prompt",
        "--idle-timeout", "30", "--first-byte-timeout", "200",
        input=SECRET_B + "\n",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "3 keys" in result.output and SECRET_B not in result.output
    profile = stored("gpt")
    assert [c.env for c in profile.credentials] == [None, "OPENAI_KEY_2", None]
    assert profile.timeouts == ProfileTimeouts(first_byte=200, idle=30)
    # the typed keys are in the database sealed with the secret key, never in plain
    assert SECRET_A.encode() not in db_bytes() and SECRET_B.encode() not in db_bytes()
    key_ids = [c.key_id for c in profile.credentials if c.key_id]
    secrets = sealed_secrets()
    assert [secrets[k] for k in key_ids] == [SECRET_A, SECRET_B]
    listed = cli("profile", "list")
    assert listed.exit_code == 0, listed.output
    assert "keys (3):" in listed.output and "$OPENAI_KEY_2" in listed.output
    assert "idle 30s" in listed.output
    assert SECRET_A not in listed.output and SECRET_B not in listed.output


def test_fallback_add_list_remove() -> None:
    for name, model in (("main", "m1"), ("backup", "b1")):
        assert cli("profile", "add", name, "-m", model).exit_code == 0
    added = cli("profile", "fallback", "main", "add", "backup")
    assert added.exit_code == 0, added.output
    added = cli("profile", "fallback", "main", "add", "backup:b2-large:free")
    assert added.exit_code == 0, added.output
    assert "1. backup" in added.output and "2. backup:b2-large:free" in added.output
    assert stored("main").fallback_chain == "main"
    listed = cli("profile", "list")
    assert "backup → backup:b2-large:free" in listed.output
    assert cli("profile", "fallback", "main", "list").output.count("backup") == 2

    removed = cli("profile", "fallback", "main", "remove", "backup:b2-large:free")
    assert removed.exit_code == 0, removed.output
    assert "1. backup" in removed.output and "b2-large" not in removed.output
    missing = cli("profile", "fallback", "main", "remove", "backup:nope")
    assert missing.exit_code == 1 and "not in 'main'" in missing.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("profile", "fallback", "main", "add", "ghost"), "no connection profile 'ghost'"),
        (("profile", "fallback", "main", "add", "main"), "its own fallback"),
        (("profile", "fallback", "main", "add", ":m"), "PROFILE or PROFILE:MODEL"),
        (("profile", "fallback", "main", "swap", "x"), "add, remove, list, randomize or ordered"),
        (("profile", "add", "other", "--key", "env:"), "env:NAME"),
        (("profile", "add", "other", "--idle-timeout", "0"), "--idle-timeout must be"),
        (("profile", "add", "main"), "exists"),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(args: tuple[str, ...], message: str) -> None:
    assert cli("profile", "add", "main", "-m", "m1").exit_code == 0
    before = db_bytes()
    result = cli(*args)
    assert result.exit_code in (1, 2) and message in result.output, result.output
    assert stored("main").fallback_chain is None
    assert cli("profile", "list").output.count("other") == 0
    assert db_bytes() == before


def test_replace_deletes_the_keys_it_no_longer_uses_and_keeps_the_chain() -> None:
    assert cli("profile", "add", "b", "-m", "m").exit_code == 0
    assert cli("profile", "add", "a", "--key", SECRET_A).exit_code == 0
    assert cli("profile", "fallback", "a", "add", "b").exit_code == 0
    old_key = stored("a").credentials[0].key_id
    assert old_key is not None
    assert old_key in sealed_secrets()
    assert cli("profile", "add", "a", "--key", "env:X", "--replace").exit_code == 0
    assert old_key not in sealed_secrets()
    assert stored("a").fallback_chain == "a"
    assert cli("profile", "remove", "a").exit_code == 0
    assert sealed_secrets() == {}  # no key is left


async def test_the_python_api_matches_the_cli(tmp_path: Path) -> None:
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        profiles = tk.profiles
        await profiles.add("b", model="m")
        added = await profiles.add("a", keys=[SECRET_A, "env:K2"], activate=True)
        assert len(added.credentials) == 2
        with pytest.raises(Conflict):
            await profiles.add("a")
        with pytest.raises(FormatError):
            await profiles.add("c", keys=["env:bad name"])
        with pytest.raises(NotFound):
            await profiles.get("c")
        assert await profiles.add_fallback("a", "b", model="m2") == [
            FallbackEntry(profile="b", model="m2")
        ]
        with pytest.raises(Conflict):
            await profiles.add_fallback("a", "b", model="m2")
        (summary,) = [s for s in await profiles.summaries() if s.name == "a"]
        assert (summary.pool_size, summary.fallbacks, summary.active) == (2, ("b:m2",), True)
        assert SECRET_A not in repr(summary)
        assert await profiles.remove_fallback("a", "b") == []
        assert await profiles.fallbacks("a") == []
