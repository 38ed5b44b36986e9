"""A chat's ``chat_metadata.integrity`` id is found by an index (migration 012), on both
backends: kept as the header is written, and filled in for chats stored before the column."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tavernkit.store import Store
from tavernkit.store.sqlite import open_store as open_sqlite_store


def header(integrity: object) -> dict[str, object]:
    return {"user_name": "Ada", "character_name": "Mira", "chat_metadata": {"integrity": integrity}}


async def test_found_by_id_kept_as_the_header_changes(store: Store) -> None:
    first = await store.create_chat(header("abc"), [], name="one")
    branch = await store.create_chat(header("abc"), [], name="two")
    await store.create_chat(header("xyz"), [], name="other")
    await store.create_chat(header(17), [], name="not an id")
    await store.create_chat({"user_name": "Ada"}, [], name="no metadata")
    await store.create_chat(header("abc"), [], owner="bob", name="bob's")
    found = await store.chats_with_integrity("abc")
    assert sorted(c.name for c in found) == ["one", "two"]
    assert {c.id for c in found} == {first.id, branch.id}
    await store.update_chat_metadata(branch.id, {"integrity": "new"})
    assert [c.name for c in await store.chats_with_integrity("abc")] == ["one"]
    assert [c.name for c in await store.chats_with_integrity("new")] == ["two"]
    await store.update_chat_header(first.id, {"user_name": "Ada"})
    assert await store.chats_with_integrity("abc") == []
    assert [c.name for c in await store.chats_with_integrity("abc", owner="bob")] == ["bob's"]


async def test_the_migration_fills_in_chats_stored_before_it(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    store = await open_sqlite_store(db)
    await store.create_chat(header("abc"), [], name="old")
    await store.close()
    with sqlite3.connect(db) as conn:  # back to the schema before 012
        conn.execute("DROP INDEX chats_by_integrity")
        conn.execute("ALTER TABLE chats DROP COLUMN integrity")
        conn.execute("DELETE FROM _migrations WHERE name = '012_chat_integrity'")
    store = await open_sqlite_store(db)
    try:
        assert [c.name for c in await store.chats_with_integrity("abc")] == ["old"]
    finally:
        await store.close()
