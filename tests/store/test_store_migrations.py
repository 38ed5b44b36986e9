"""Opening the database: migrations once and in order, WAL, foreign keys, private files."""

from __future__ import annotations

import json
import sqlite3
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tavernkit.errors import StoreError
from tavernkit.store import data_dir, default_db_path, open_store
from tavernkit.store.migrations import MIGRATIONS, apply_migrations
from tavernkit.store.sqlite_thread import SqliteConnection
from tavernkit.store.sqlite_thread import connect as connect_sqlite


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _migration_rows(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        rows = [r[0] for r in db.execute("SELECT name FROM _migrations ORDER BY name")]
    db.close()
    return rows


async def test_migrations_apply_once_and_data_survives_reopening(db_path: Path) -> None:
    async with await open_store(db_path) as store:
        await store.put("lorebook", {"entries": {}}, name="Coast")
    assert _migration_rows(db_path) == [name for name, _ in MIGRATIONS]
    async with await open_store(db_path) as store:
        assert [i.name for i in await store.list("lorebook")] == ["Coast"]
    assert _migration_rows(db_path) == [name for name, _ in MIGRATIONS]


async def test_wal_mode_and_foreign_keys_are_on(db_path: Path) -> None:
    async with await open_store(db_path) as store:
        assert await store.pragma("journal_mode") == "wal"
        assert await store.pragma("foreign_keys") == 1
        with pytest.raises(StoreError):
            await store.pragma("journal_mode; DROP TABLE records")


async def test_a_database_from_a_newer_version_is_refused(db_path: Path) -> None:
    async with await open_store(db_path):
        pass
    with sqlite3.connect(db_path) as db:
        db.execute("INSERT INTO _migrations VALUES ('999_future', 'x')")
    db.close()
    with pytest.raises(StoreError, match="newer tavernkit"):
        await open_store(db_path)


async def test_a_failing_migration_leaves_nothing_behind(tmp_path: Path) -> None:
    async def good(db: SqliteConnection) -> None:
        await db.execute("CREATE TABLE good (x)")

    async def bad(db: SqliteConnection) -> None:
        await db.execute("CREATE TABLE half (x)")
        await db.execute("THIS IS NOT SQL")

    def now() -> datetime:
        return datetime(2025, 1, 1, tzinfo=UTC)

    async with await connect_sqlite(tmp_path / "m.db", isolation_level=None) as db:
        with pytest.raises(StoreError, match="cannot migrate"):
            await apply_migrations(db, now=now, migrations=[("001", good), ("002", bad)])
        async with db.execute("SELECT name FROM sqlite_master WHERE type = 'table'") as cur:
            tables = {r[0] for r in await cur.fetchall()}
        assert "good" in tables and "half" not in tables
        async with db.execute("SELECT name FROM _migrations") as cur:
            assert [r[0] for r in await cur.fetchall()] == ["001"]

        # Fixed and run again, only the missing step runs.
        async def fixed(db: SqliteConnection) -> None:
            await db.execute("CREATE TABLE half (x)")

        applied = await apply_migrations(db, now=now, migrations=[("001", good), ("002", fixed)])
        assert applied == ["002"]


def test_data_dir_comes_from_tavernkit_home_and_is_private(tmp_path: Path) -> None:
    home = tmp_path / "nested" / "home"
    path = data_dir(environ={"TAVERNKIT_HOME": str(home)})
    assert path == home
    assert _mode(home) == 0o700
    assert default_db_path(environ={"TAVERNKIT_HOME": str(home)}) == home / "tavernkit.db"
    assert not (home / "tavernkit.db").exists()  # only the folder is made


def test_data_dir_falls_back_to_the_platform_dir() -> None:
    path = data_dir(create=False, environ={})
    assert path.name.lower() == "tavernkit"


async def test_default_store_lives_in_the_data_dir_with_private_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "fresh"
    monkeypatch.setenv("TAVERNKIT_HOME", str(home))
    async with await open_store() as store:
        await store.add_api_key("openai", "sk-secret")
        assert store.path == home / "tavernkit.db"
    assert _mode(home) == 0o700
    assert _mode(home / "tavernkit.db") == 0o600


async def test_a_file_that_is_not_a_database_raises_store_error(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot open database"):
        await open_store(path)


async def test_004_flags_the_messages_of_an_older_database(db_path: Path) -> None:
    """A database made before 004 gets each message's flags from its JSON, so the counts of a
    turn's window are right for chats stored before the upgrade."""
    now = lambda: datetime(2025, 1, 1, tzinfo=UTC)  # noqa: E731
    async with await connect_sqlite(db_path, isolation_level=None) as db:
        await apply_migrations(db, now=now, migrations=MIGRATIONS[:2])
        await db.execute(
            "INSERT INTO chats (id, owner, name, header, created, updated) "
            "VALUES ('c', 'default', 'old', '{}', '2025-01-01', '2025-01-01')"
        )
        bodies = [
            {"name": "Mira", "is_user": False, "mes": "Hi."},
            {"name": "Ada", "is_user": True, "is_system": "true", "mes": "(hidden)"},
            {"name": "Ada", "is_user": 1, "mes": "Yes."},
            {"is_system": True, "extra": {"tool_invocations": [{"name": "roll"}]}, "mes": ""},
        ]
        for i, body in enumerate(bodies):
            await db.execute(
                "INSERT INTO messages (id, chat_id, position, body, extracted, mes) "
                "VALUES (?, 'c', ?, ?, '', NULL)",
                (f"m{i}", i, json.dumps(body)),
            )
    async with await open_store(db_path) as store:
        window = await store.load_chat_window("c", last=1)
    # head: the first message (visible); tail: the newest; the gap holds messages 1 and 2
    assert window.gap.total == 2
    assert (window.gap.hidden, window.gap.user, window.gap.hidden_tools) == (1, 2, 0)
    async with await open_store(db_path) as store:
        window = await store.load_chat_window("c", last=3)
    assert window.complete and len(window.tail) == 3 and len(window.head) == 1
