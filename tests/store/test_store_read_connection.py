"""SQLite's short reads on the caller's thread (``SqliteBase._read_now``): they do not wait
for a write under way, see only committed rows, never keep an old snapshot, fall back to the
database thread when the file is busy, and look rows up by their indexes (no scan)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from tavernkit.models.settings import Settings
from tavernkit.store import SqliteStore, open_store
from tavernkit.store.sqlite_thread import SqliteConnection


def _settings(name: str) -> Settings:
    settings = Settings()
    settings.selections.user_name = name
    return settings


def _user(settings: object) -> str:
    assert isinstance(settings, Settings)
    return str(settings.selections.user_name)


async def test_a_short_read_does_not_wait_for_a_write_and_sees_only_what_is_committed(
    db_path: Path,
) -> None:
    # Over the one writer connection this read waited for the open transaction's lock
    # (here: held by this very task, so it never came).
    async with await open_store(db_path) as store:
        await store.put_settings(_settings("Ada"))
        async with store._write() as db:
            await db.execute(
                "UPDATE settings SET data = ? WHERE owner = ?",
                (_settings("Uncommitted").model_dump_json(), "default"),
            )
            during = await asyncio.wait_for(store.get_settings(), 2)
        assert _user(during) == "Ada"
        assert _user(await store.get_settings()) == "Uncommitted"


async def test_short_reads_see_each_commit_of_another_process(db_path: Path) -> None:
    async with await open_store(db_path) as a, await open_store(db_path) as b:
        chat = await a.create_chat({"user_name": "Ada"}, name="Coast")
        for n in range(3):  # each read starts from the newest commit, none from a kept one
            await a.put_settings(_settings(f"Ada {n}"))
            await a.set_global_variable("n", n)
            assert _user(await b.get_settings()) == f"Ada {n}"
            assert await b.get_global_variables() == {"n": n}
            start = await b.load_turn_start(chat.id, last=2)
            assert _user(start.settings) == f"Ada {n}" and start.global_variables == {"n": n}
        assert (await b.get_chat_info(chat.id)).id == chat.id


class _BusyReader:
    """The read connection as SQLite answers while another connection recovers the file (the
    one time a WAL reader is busy, and not one a test can stage while the store is open)."""

    def __init__(self, real: sqlite3.Connection) -> None:
        self.real = real

    def execute(self, sql: str, parameters: object = ()) -> sqlite3.Cursor:
        if sql.startswith("SELECT"):
            raise sqlite3.OperationalError("database is locked")
        return self.real.execute(sql, parameters)  # type: ignore[arg-type]


async def test_a_busy_read_connection_sends_the_read_to_the_database_thread(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await open_store(db_path) as store:
        await store.put_settings(_settings("Ada"))
        chat = await store.create_chat({"user_name": "Ada"}, name="Coast")
        assert _user(await store.get_settings()) == "Ada"
        trips: list[object] = []
        real = SqliteConnection.run

        async def counted(self: object, fn: object, *args: object, **kwargs: object) -> object:
            trips.append(fn)
            return await real(self, fn, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(SqliteConnection, "run", counted)
        reader = store._reader
        assert reader is not None
        store._reader = _BusyReader(reader)  # type: ignore[assignment]
        settings, info, start = await asyncio.gather(
            store.get_settings(),
            store.get_chat_info(chat.id),
            store.load_turn_start(chat.id, last=2),
        )
        assert _user(settings) == "Ada" and info.id == chat.id and start.window.info.id == chat.id
        assert len(trips) >= 3  # each went to the database thread
        store._reader = reader
        trips.clear()
        assert _user(await store.get_settings()) == "Ada"
        assert trips == []  # free again: back on the read connection


async def test_lookups_by_id_or_name_use_their_indexes(sqlite_store: SqliteStore) -> None:
    """A chat's row and a record's row, by id or by name: every statement searches an index
    (SQLite's plan has no SCAN). With ``id = ? OR name = ?`` it read every chat, or every
    record of the kind, of the owner: 6 ms a lookup at 3,000 lorebooks."""
    store = sqlite_store
    for i in range(3):
        await store.put("lorebook", {"entries": {}}, name=f"book {i}")
        await store.create_chat({"user_name": "Ada"}, name=f"chat {i}")
    book = (await store.list("lorebook"))[0]
    chat = (await store.list_chats())[0]
    seen: list[str] = []
    async with store.trace(seen.append):
        await store.get_chat_info(chat.id)
        await store.get_chat_info(chat.name)
        await store.get_record("lorebook", book.id)
        await store.get_record("lorebook", "book 2")
        await store.get_shared_records([("lorebook", book.id), ("lorebook", "book 1")])
        await store.get_shared("lorebook", "book 2")
    lookups = [s for s in seen if s.startswith("SELECT") and "UNION ALL" in s]
    assert len(lookups) >= 6
    with sqlite3.connect(store.path) as raw:
        for sql in lookups:
            plan = [str(row[3]) for row in raw.execute("EXPLAIN QUERY PLAN " + sql)]
            assert not [step for step in plan if step.startswith("SCAN")], (sql, plan)


async def test_a_library_page_and_its_tags_do_not_wait_for_a_write(db_path: Path) -> None:
    # A chat import's batch holds the write transaction; the character grid another user
    # (or tab) asks for meanwhile was answered only after it (hundreds of ms on a big import).
    async with await open_store(db_path) as store:
        card = {"spec": "chara_card_v2", "spec_version": "2.0"}
        data = {"name": "Mira", "description": "", "tags": ["coast"]}
        await store.put("character", {**card, "data": data})
        async with store._write() as db:
            await db.execute("UPDATE records SET name = 'Uncommitted' WHERE kind = 'character'")
            page = await asyncio.wait_for(store.list_page("character"), 2)
            tags = await asyncio.wait_for(store.character_tags(), 2)
        assert [info.name for info in page.items] == ["Mira"] and page.total == 1
        assert tags == [("coast", 1)]
