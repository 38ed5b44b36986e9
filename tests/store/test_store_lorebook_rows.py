"""A lorebook's entries as rows (migration 016): an edit of one entry writes that entry's row
and not the book's record; the book read whole is the same bytes as the book stored; books
stored before the migration move to rows unchanged, with their bytes still counted. On
SQLite and PostgreSQL."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from store._before import migrations_before
from tavernkit.errors import NotFound
from tavernkit.store import SqliteStore, Store, open_postgres_store, open_store
from tavernkit.store._message_rows import dumps
from tavernkit.store.migrations import apply_migrations
from tavernkit.store.postgres import PostgresStore
from tavernkit.store.record_types import ENTRY_LINE_FIELDS
from tavernkit.store.sqlite_thread import connect as connect_sqlite
from tavernkit.store.storage_use import recount_sql


def _book(n: int) -> dict[str, Any]:
    return {
        "name": "Coast",
        "description": 'tides – ünïcode \u2028 "quoted"',
        "entries": {
            str(i): {"uid": i, "key": [f"k{i}"], "content": f"entry {i} ✓", "order": 100}
            for i in range(n)
        },
        "extensions": {"vendor": [1, 2.5, None, {"x": "y"}]},
    }


async def _stored_use(store: Store) -> tuple[int, int]:
    """(what the triggers kept, a full recount) of the default owner's bytes."""
    assert isinstance(store, SqliteStore)
    dialect = "pg" if isinstance(store, PostgresStore) else "sqlite"
    async with store._read() as db:  # the store's own package's tests
        counted = dict(await db.execute_fetchall(recount_sql(dialect)))
    return await store.storage_used(), int(counted.get("default", 0))


def _table(statement: str) -> str:
    words = statement.split()
    return words[1] if words[0].upper() == "UPDATE" else words[2]


async def test_an_entry_write_touches_its_row_and_not_the_book(store: Store) -> None:
    assert isinstance(store, SqliteStore)
    book = (await store.put("lorebook", _book(300), name="Coast")).id
    before = await store.get_shared_record("lorebook", book)
    seen: list[str] = []
    changed = {"uid": 7, "key": ["lamp"], "content": "Lit."}
    async with store.trace(seen.append):
        await store.put_record_member("lorebook", book, ("entries", "7"), changed)
        await store.put_record_member("lorebook", book, ("entries", "300"), {"uid": 300})
        await store.delete_record_member("lorebook", book, ("entries", "3"))
    # the entries' own rows are written, and of the book's record its revision alone (a
    # statement is seen once per trigger step on SQLite: a set of them)
    writes = {w for w in seen if w.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))}
    assert {_table(w) for w in writes} == {"lorebook_entries", "records"}
    for w in writes:
        if _table(w) == "records":
            assert w.startswith("UPDATE records SET updated = ")
            assert "data" not in w.split("WHERE")[0]
    want = _book(300)
    want["entries"]["7"] = changed
    want["entries"]["300"] = {"uid": 300}
    del want["entries"]["3"]
    _, text = await store.get_record_text("lorebook", book)
    assert text == dumps(want)
    assert list(json.loads(text)["entries"])[-2:] == ["299", "300"]
    # the turns' shared book follows the entry writes (the revision moved)
    after = await store.get_shared_record("lorebook", book)
    assert after is not before and after.digest != before.digest
    assert after.model.entries["7"].content == "Lit."  # type: ignore[attr-defined]
    assert "3" not in after.model.entries  # type: ignore[attr-defined]
    kept, counted = await _stored_use(store)
    assert kept == counted


async def test_the_whole_book_reads_back_as_stored(store: Store) -> None:
    data = _book(50)
    ref = await store.put("lorebook", data, name="Coast")
    _, text = await store.get_record_text("lorebook", ref.id)
    assert text == dumps(data)
    assert (await store.get_record("lorebook", "Coast")).data == data
    shared = await store.get_shared_record("lorebook", ref.id)
    assert shared.data == data and len(shared.model.entries) == 50  # type: ignore[attr-defined]
    # a rewrite of the whole book replaces its rows; an empty one has none
    await store.put("lorebook", _book(2), name="Coast", id=ref.id)
    assert (await store.get_record_text("lorebook", ref.id))[1] == dumps(_book(2))
    await store.put("lorebook", {"name": "Coast", "entries": {}}, name="Coast", id=ref.id)
    assert (await store.get_record("lorebook", ref.id)).data == {"name": "Coast", "entries": {}}
    await store.delete("lorebook", ref.id)
    kept, counted = await _stored_use(store)
    assert kept == counted == 0


async def test_an_editors_lines_carry_each_entry_but_its_content(store: Store) -> None:
    data = _book(4)
    data["entries"]["2"].update(comment="Quay", disable=True, content="The ÜNÏCODE Harbour.")
    data["entries"]["9"] = {
        "uid": 9,
        "key": ["late"],
        "content": 'harbour lights 50% off_peak "dim"',
    }
    ref = await store.put("lorebook", data, name="Coast")
    info, text = await store.lorebook_entry_lines("Coast")
    assert info.id == ref.id and "entry 1 ✓" not in text  # no content
    expected = [
        [*(e.get(name) for name in ENTRY_LINE_FIELDS), uid] for uid, e in data["entries"].items()
    ]
    assert json.loads(text) == expected
    assert expected[2][:5] == ["Quay", ["k2"], None, True, None]
    # only the entries whose content holds the text, in any case (SQLite folds only ASCII
    # itself: "ünïcode" is matched otherwise)
    for query, uids in (
        ("HARBOUR", ["2", "9"]),
        ("ünïcode harbour", ["2"]),
        ("ferry", []),
        ("50% OFF_", ["9"]),  # LIKE's wildcards are the text's own
        ("0_ o", []),
        ('peak "DIM"', ["9"]),  # a quote: written escaped in the row's JSON
    ):
        _, found = await store.lorebook_entry_lines(ref.id, content_has=query)
        assert [line[-1] for line in json.loads(found)] == uids, query
    # a new entry's line comes last; a changed one's shows the change
    await store.put_record_member("lorebook", ref.id, ("entries", "4"), {"uid": 4, "order": 7})
    await store.put_record_member(
        "lorebook", ref.id, ("entries", "0"), {**data["entries"]["0"], "comment": "Gate"}
    )
    lines = json.loads((await store.lorebook_entry_lines(ref.id))[1])
    assert lines[-1] == [None] * 5 + [7, None, None, None, "4"] and lines[0][0] == "Gate"
    with pytest.raises(NotFound):
        await store.lorebook_entry_lines(ref.id, owner="someone-else")


_NOW = datetime(2025, 1, 1, tzinfo=UTC).isoformat()
_OLD_BOOK = (
    "INSERT INTO records (id, owner, kind, name, name_key, data, created, updated) "
    "VALUES ('b1', 'default', 'lorebook', 'Coast', 'Coast', {mark}, '{now}', '{now}')"
)


async def test_books_stored_before_016_move_to_rows_unchanged(db_path: Path) -> None:
    text = dumps(_book(40))
    async with await connect_sqlite(db_path, isolation_level=None) as db:
        await apply_migrations(
            db, now=lambda: datetime.now(UTC), migrations=migrations_before("016_lorebook_entries")
        )
        await db.execute(_OLD_BOOK.format(mark="?", now=_NOW), (text,))
    async with await open_store(db_path) as store:
        assert (await store.get_record_text("lorebook", "b1"))[1] == text
        assert await store.record_member_keys("lorebook", "b1", ("entries",)) == [
            str(i) for i in range(40)
        ]
        kept, counted = await _stored_use(store)
        assert kept == counted
    db = sqlite3.connect(db_path)
    try:
        assert db.execute("SELECT count(*) FROM lorebook_entries").fetchone()[0] == 40
        # the book's record keeps the rest: its entries emptied in place
        (rest,) = db.execute("SELECT data FROM records WHERE id = 'b1'").fetchone()
        assert list(json.loads(rest)) == list(_book(0)) and json.loads(rest)["entries"] == {}
    finally:
        db.close()


_PG_BEFORE_016 = (
    "DROP TRIGGER records_entries_use_out ON records",
    "DROP FUNCTION tk_use_records_entries_out()",
    "DROP TABLE lorebook_entries",
    "DROP FUNCTION tk_use_lorebook_entries()",
    "DELETE FROM _migrations WHERE name = '016_lorebook_entries'",
)


async def test_postgres_books_stored_before_016_move_to_rows_unchanged(
    postgres_url: str, tmp_path: Path
) -> None:
    text = dumps(_book(40))
    await (await open_postgres_store(postgres_url, key_dir=tmp_path)).close()
    conn = await asyncpg.connect(postgres_url)
    try:
        for sql in _PG_BEFORE_016:
            await conn.execute(sql)
        await conn.execute(_OLD_BOOK.format(mark="$1", now=_NOW), text)
    finally:
        await conn.close()
    store = await open_postgres_store(postgres_url, key_dir=tmp_path)
    try:
        assert (await store.get_record_text("lorebook", "b1"))[1] == text
        keys = await store.record_member_keys("lorebook", "b1", ("entries",))
        assert keys == [str(i) for i in range(40)]
        kept, counted = await _stored_use(store)
        assert kept == counted
    finally:
        await store.close()
