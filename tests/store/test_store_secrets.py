"""API keys: the secret comes back from one call only; key-pool state carries none."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tavernkit.errors import NotFound, StoreError
from tavernkit.store import KeyState, SqliteStore

SECRET = "sk-Q9f8e7d6c5b4a3210ZYXWVUTSRQ"


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


async def test_the_secret_is_stored_in_the_api_keys_table_alone(
    store: SqliteStore, db_path: Path
) -> None:
    key_id = await store.add_api_key("openai", SECRET)
    await store.put(
        "connection_profile",
        {"name": "p", "credentials": [{"key_id": key_id, "label": "work"}]},
    )
    await store.put_key_state(KeyState(key_id, failures=1, last_error_code="auth"))
    await store.close()
    with sqlite3.connect(db_path) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        holding = [t for t in tables if SECRET in repr(db.execute(f"SELECT * FROM {t}").fetchall())]
    db.close()
    assert holding == ["api_keys"]


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
