"""API keys: the secret comes back from one call only; key-pool state carries none."""

from __future__ import annotations

import sqlite3
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tavernkit.errors import NotFound, StoreError
from tavernkit.store import KeyState, SqliteStore, open_store
from tavernkit.store.key_files import key_dir_for
from tavernkit.store.migrations import MIGRATIONS, apply_migrations
from tavernkit.store.sqlite_thread import connect as connect_sqlite

# no run of 4 hex digits in it: a random key id or fingerprint (hex) must not look like a leak
SECRET = "sk-Q9g8h7j6k5m4n3p2ZYXWVUTSRQ"


async def test_secret_is_returned_by_get_api_key_secret_only(store: SqliteStore) -> None:
    key_id = await store.add_api_key("openai", SECRET, label="work")
    other = await store.add_api_key("openai", SECRET + "2", label="home")
    await store.add_api_key("claude", "sk-ant-xyz", label="c")

    keys = await store.list_api_keys("openai")
    assert [(k.id, k.label, k.provider) for k in keys] == [
        (key_id, "work", "openai"),
        (other, "home", "openai"),
    ]
    assert len(await store.list_api_keys()) == 3
    # Neither the secret nor any 4+ character piece of it shows in a listing or its repr.
    shown = repr(keys) + str(keys) + repr(store)
    for i in range(len(SECRET) - 3):
        assert SECRET[i : i + 4] not in shown
    assert keys[0].fingerprint != keys[1].fingerprint

    assert await store.get_api_key_secret(key_id) == SECRET


async def test_keys_are_scoped_by_owner(store: SqliteStore) -> None:
    key_id = await store.add_api_key("openai", SECRET, owner="alice")
    assert await store.list_api_keys(owner="bob") == []
    with pytest.raises(NotFound) as info:
        await store.get_api_key_secret(key_id, owner="bob")
    assert SECRET not in str(info.value)
    with pytest.raises(NotFound):
        await store.delete_api_key(key_id, owner="bob")
    with pytest.raises(NotFound):
        await store.get_key_state(key_id, owner="bob")


async def test_bad_keys_are_refused_without_echoing_them(store: SqliteStore) -> None:
    with pytest.raises(StoreError) as info:
        await store.add_api_key("", SECRET)
    assert SECRET not in str(info.value)
    with pytest.raises(StoreError):
        await store.add_api_key("openai", "   ")


async def test_trace_keeps_no_sql_text(store: SqliteStore) -> None:
    async with store.trace() as stats:
        await store.add_api_key("openai", SECRET)
    assert stats.statements == 1
    assert SECRET not in repr(stats)


def _db_bytes(db_path: Path) -> bytes:
    files = [db_path, db_path.with_name(db_path.name + "-wal")]
    return b"".join(f.read_bytes() for f in files if f.exists())


async def test_the_secret_is_kept_out_of_the_database(store: SqliteStore, db_path: Path) -> None:
    key_id = await store.add_api_key("openai", SECRET)
    await store.put(
        "connection_profile",
        {"name": "p", "credentials": [{"key_id": key_id, "label": "work"}]},
    )
    await store.put_key_state(KeyState(key_id, failures=1, last_error_code="auth"))
    assert await store.get_api_key_secret(key_id) == SECRET
    await store.close()
    with sqlite3.connect(db_path) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        holding = [t for t in tables if SECRET in repr(db.execute(f"SELECT * FROM {t}").fetchall())]
    db.close()
    assert holding == []
    assert SECRET.encode() not in _db_bytes(db_path)
    # the secret is in a private file of a private folder beside the database
    folder = key_dir_for(db_path)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / key_id).stat().st_mode) == 0o600
    assert (folder / key_id).read_text() == SECRET


async def test_deleting_a_key_deletes_its_secret_file(store: SqliteStore, db_path: Path) -> None:
    key_id = await store.add_api_key("openai", SECRET)
    await store.delete_api_key(key_id)
    assert not (key_dir_for(db_path) / key_id).exists()


async def test_a_database_copied_without_its_key_folder_says_so(
    store: SqliteStore, db_path: Path, tmp_path: Path
) -> None:
    key_id = await store.add_api_key("openai", SECRET)
    await store.close()
    copy = tmp_path / "elsewhere" / "copy.db"
    copy.parent.mkdir()
    with sqlite3.connect(db_path) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    src.close()
    dst.close()
    async with await open_store(copy) as moved:
        assert [k.id for k in await moved.list_api_keys()] == [key_id]
        with pytest.raises(StoreError, match="missing") as info:
            await moved.get_api_key_secret(key_id)
        assert SECRET not in str(info.value)


async def test_migration_003_moves_stored_secrets_out_of_the_database(db_path: Path) -> None:
    old = MIGRATIONS[:2]
    conn = await connect_sqlite(db_path, isolation_level=None)
    await conn.execute("PRAGMA journal_mode=WAL")
    await apply_migrations(conn, now=lambda: datetime.now(UTC), migrations=old)
    await conn.execute(
        "INSERT INTO api_keys (id, owner, provider, label, secret, fingerprint, created) "
        "VALUES ('k1', 'default', 'openai', 'work', ?, 'f', '2025-01-01T00:00:00+00:00')",
        (SECRET,),
    )
    await conn.close()
    assert SECRET.encode() in _db_bytes(db_path)

    async with await open_store(db_path) as store:
        assert await store.get_api_key_secret("k1") == SECRET
        await store.put_key_state(KeyState("k1", failures=2, last_error_code="rate_limit"))
    assert SECRET.encode() not in _db_bytes(db_path)
    assert (key_dir_for(db_path) / "k1").read_text() == SECRET
    # opening again changes nothing
    async with await open_store(db_path) as store:
        assert await store.get_api_key_secret("k1") == SECRET
        assert (await store.get_key_state("k1")).failures == 2


async def test_key_pool_state_round_trip_and_cascade(store: SqliteStore) -> None:
    key_id = await store.add_api_key("openai", SECRET)
    assert await store.get_key_state(key_id) == KeyState(key_id=key_id)
    until = datetime(2025, 6, 1, 12, 30, tzinfo=UTC)
    state = KeyState(key_id, cooldown_until=until, failures=3, last_error_code="rate_limit")
    await store.put_key_state(state)
    assert await store.get_key_state(key_id) == state
    await store.put_key_state(KeyState(key_id, failures=0))
    assert await store.get_key_state(key_id) == KeyState(key_id)
    with pytest.raises(NotFound):
        await store.put_key_state(KeyState("missing"))
    await store.delete_api_key(key_id)
    with pytest.raises(NotFound):
        await store.get_key_state(key_id)
    with pytest.raises(NotFound):
        await store.get_api_key_secret(key_id)
