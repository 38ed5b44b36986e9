"""Each owner's stored bytes (migration 009) and each chat's message counts (004): kept by
triggers through every kind of write, equal to a full recount of the data, on SQLite and
PostgreSQL alike."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from tavernkit.models.settings import Settings
from tavernkit.store import SqliteStore, open_store
from tavernkit.store.chat_types import SwipeText
from tavernkit.store.postgres import PostgresStore
from tavernkit.store.storage_use import SIZED, recount_sql

HEADER: dict[str, Any] = {"user_name": "u", "character_name": "c", "chat_metadata": {}}
MiB = 1024 * 1024


async def _recount(store: SqliteStore) -> dict[str, int]:
    dialect = "pg" if isinstance(store, PostgresStore) else "sqlite"
    async with store._read() as db:  # the store's own package's tests
        rows = await db.execute_fetchall(recount_sql(dialect))
    return {str(owner): int(n) for owner, n in rows}


async def _kept(store: SqliteStore) -> dict[str, int]:
    async with store._read() as db:
        rows = await db.execute_fetchall("SELECT owner, bytes FROM storage_use WHERE bytes <> 0")
    return {str(owner): int(n) for owner, n in rows}


async def _check(store: SqliteStore) -> dict[str, int]:
    kept = await _kept(store)
    assert kept == await _recount(store)
    for owner, used in kept.items():
        assert await store.storage_used(owner=owner) == used
    return kept


def _message(text: str, **extra: Any) -> dict[str, Any]:
    return {"name": "A", "is_user": False, "mes": text, "extra": {}, **extra}


async def test_every_write_is_counted_and_every_delete_gives_back(store: SqliteStore) -> None:
    assert await store.storage_used(owner="ann") == 0
    ref = await store.put(
        "character",
        {"spec": "chara_card_v2", "data": {"name": "Aria"}},
        owner="ann",
        name="Aria",
        blobs={"avatar": b"\x89PNG" + b"x" * MiB},
    )
    used = (await _check(store))["ann"]
    assert MiB < used < MiB + 4096
    await store.put(
        "lorebook",
        {"name": "big", "entries": {"0": {"content": "é" * 1000}}},
        owner="ann",
        name="big",
    )
    before = (await _check(store))["ann"]
    # one entry written and removed by its path (the lorebook editor's writes)
    entry = {"uid": 1, "content": "ü" * 2000}
    await store.put_record_member("lorebook", "big", ("entries", "1"), entry, owner="ann")
    assert (await _check(store))["ann"] > before + 2000
    await store.delete_record_member("lorebook", "big", ("entries", "1"), owner="ann")
    assert (await _check(store))["ann"] == before
    await store.set_global_variable("mood", "calm" * 100, owner="ann")
    await store.put_settings(Settings(), owner="ann")
    chat = await store.create_chat(
        HEADER,
        [_message("hello 灯台", swipes=["hello 灯台", "other"], swipe_id=0), _message("two")],
        owner="ann",
        name="c1",
        character=ref.id,
    )
    await _check(store)
    # a chat's name and header count; a write of its other columns (a turn's) changes nothing
    await store.rename_chat(chat.id, "c1 " + "ñ" * 500, owner="ann")
    await _check(store)
    await store.update_chat_header(chat.id, {**HEADER, "note": "n" * 700}, owner="ann")
    await _check(store)
    appended = await store.append_message(chat.id, _message("x" * 5000), owner="ann")
    index = await store.append_swipe(appended.id, "y" * 300, owner="ann", complete=False)
    await store.update_swipe_texts([SwipeText(appended.id, index, "y" * 9000)])
    grown = (await _check(store))["ann"]
    # bob's writes are bob's
    await store.put("persona", {"name": "p"}, owner="bob", name="p")
    assert (await _check(store))["ann"] == grown
    await store.delete_swipe(appended.id, index, owner="ann")
    await _check(store)
    # a message written whole (a turn's finished reply, an edit): its swipes grow and shrink
    for swipes in (["a" * 700, "b" * 80, "c"], ["d" * 40], ["e", "f" * 3000]):
        message = _message(swipes[-1], swipes=swipes, swipe_id=len(swipes) - 1)
        await store.update_message(appended.id, message, owner="ann")
        await _check(store)
        assert (await store.get_message(appended.id, owner="ann")).data["swipes"] == swipes
    await store.truncate_chat(chat.id, 1, owner="ann")
    assert (await _check(store))["ann"] < grown
    # a record's delete takes its blobs; a chat's its messages and their swipes
    await store.delete("character", ref.id, owner="ann")
    await _check(store)
    await store.delete_chat(chat.id, owner="ann")
    await store.delete("lorebook", "big", owner="ann")
    await store.delete_global_variable("mood", owner="ann")
    await _check(store)
    # what is left is the settings row alone
    assert 0 < await store.storage_used(owner="ann") < 4096


async def test_the_migration_counts_what_was_stored_before_it(db_path: Path) -> None:
    async with await open_store(db_path) as store:
        await store.put("persona", {"name": "p", "description": "d" * 5000}, owner="ann", name="p")
        await store.create_chat(
            HEADER, [_message("hi", swipes=["hi", "yo"])], owner="ann", name="c"
        )
        before = await _check(store)
    with sqlite3.connect(db_path) as db:  # as a database of the version before 009
        for table in SIZED:
            for step in ("in", "edit", "out"):
                db.execute(f"DROP TRIGGER {table}_use_{step}")
        db.execute("DROP TABLE storage_use")
        db.execute("DELETE FROM _migrations WHERE name = '009_storage_use'")
    db.close()
    async with await open_store(db_path) as store:
        assert await _check(store) == before


async def _counts_kept_and_recounted(store: SqliteStore) -> tuple[list[Any], list[Any]]:
    async with store._read() as db:
        kept = await db.execute_fetchall(
            "SELECT id, msg_total, msg_hidden, msg_user, msg_hidden_tools FROM chats ORDER BY id"
        )
        recounted = await db.execute_fetchall(
            "SELECT c.id, count(m.id), coalesce(sum(m.flags & 1), 0), "
            "coalesce(sum((m.flags & 2) / 2), 0), "
            "coalesce(sum(CASE WHEN (m.flags & 5) = 5 THEN 1 ELSE 0 END), 0) "
            "FROM chats c LEFT JOIN messages m ON m.chat_id = c.id GROUP BY c.id ORDER BY c.id"
        )
    return [(r[0], *map(int, r[1:])) for r in kept], [(r[0], *map(int, r[1:])) for r in recounted]


async def test_a_chats_message_counts_follow_every_hide_and_edit(store: SqliteStore) -> None:
    tool = {"tool_invocations": [{"name": "roll"}]}
    chat = await store.create_chat(
        HEADER,
        [_message("a"), _message("b", is_user=True), _message("c", extra=tool)],
        owner="ann",
        name="c",
    )
    other = await store.create_chat(HEADER, [_message("z")], owner="ann", name="d")
    kept, recounted = await _counts_kept_and_recounted(store)
    assert kept == recounted
    messages = (await store.load_chat(chat.id, owner="ann")).messages
    # hidden, shown again, a user's message hidden, a tool call hidden, a text edit alone
    edits = [
        (0, {"is_system": True}),
        (0, {"is_system": False}),
        (1, {"is_system": True}),
        (2, {"is_system": True}),
        (2, {"mes": "c again"}),
        (1, {"is_user": False}),
    ]
    for at, change in edits:
        message = messages[at]
        await store.update_message(message.id, {**message.data, **change}, owner="ann")
        messages = (await store.load_chat(chat.id, owner="ann")).messages
        kept, recounted = await _counts_kept_and_recounted(store)
        assert kept == recounted, change
    await store.update_swipe_texts([SwipeText(messages[2].id, 0, "streamed")])
    kept, recounted = await _counts_kept_and_recounted(store)
    assert kept == recounted
    assert dict((r[0], r[1:]) for r in kept)[chat.id] == (3, 2, 0, 1)
    assert dict((r[0], r[1:]) for r in kept)[other.id] == (1, 0, 0, 0)
