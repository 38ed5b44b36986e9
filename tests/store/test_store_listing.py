"""A page of a record listing (``Store.list_page``): its orders, name filter and total on both
backends, and that SQLite reads it from the listing indexes alone (migration 011), never the
records' rows; which of a page's records have a blob (``Store.records_with_blob``) in one
indexed query."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from store._before import migrations_before
from tavernkit.errors import StoreError
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.store import SqliteStore, Store, _sqlite_listing
from tavernkit.store._sqlite_listing import (
    ORDER_SQL,
    ListFilter,
    chatted_sql,
    count_sql,
    page_sql,
    with_blob_sql,
)
from tavernkit.store.migrations import apply_migrations
from tavernkit.store.sqlite import open_store
from tavernkit.store.sqlite_thread import connect as connect_sqlite


def card(name: str) -> dict[str, Any]:
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": name}}


async def fill(store: Store, names: list[str]) -> None:
    for name in names:  # the store's clock moves a second per write: made in this order
        await store.put("character", card(name))


async def names_of(store: Store, **kw: Any) -> tuple[list[str], int]:
    page = await store.list_page("character", **kw)
    return [i.name for i in page.items], page.total


async def test_orders_pages_and_totals(store: Store) -> None:
    await fill(store, ["bea", "Ann", "Cid", "dora", "Eve"])
    await store.put("lorebook", {"entries": {}}, name="Atlas")  # another kind: not listed
    assert await names_of(store) == (["Ann", "bea", "Cid", "dora", "Eve"], 5)
    assert await names_of(store, order="name_desc") == (["Eve", "dora", "Cid", "bea", "Ann"], 5)
    assert await names_of(store, order="newest") == (["Eve", "dora", "Cid", "Ann", "bea"], 5)
    assert await names_of(store, order="oldest") == (["bea", "Ann", "Cid", "dora", "Eve"], 5)
    assert await names_of(store, offset=1, limit=2) == (["bea", "Cid"], 5)
    assert await names_of(store, offset=9, limit=2) == ([], 5)
    # an edit moves a card to the front of "updated"
    ann = (await store.get_record("character", "Ann")).info
    await store.put("character", card("Ann"), id=ann.id)
    assert (await names_of(store, order="updated", limit=2))[0] == ["Ann", "Eve"]
    page = await store.list_page("character", limit=1)
    assert page.items[0] == (await store.get_record("character", "Ann")).info


async def test_name_filter_folds_case_and_takes_wildcards_literally(store: Store) -> None:
    await fill(store, ["Keeper 100", "keeper 101", "Sailor", "50% off", "snake_case", "back\\s"])
    assert await names_of(store, name_contains="KEEP") == (["Keeper 100", "keeper 101"], 2)
    assert await names_of(store, name_contains="eper 10", limit=1) == (["Keeper 100"], 2)
    assert await names_of(store, name_contains="%") == (["50% off"], 1)
    assert await names_of(store, name_contains="_") == (["snake_case"], 1)
    assert await names_of(store, name_contains="\\") == (["back\\s"], 1)
    assert await names_of(store, name_contains="nobody") == ([], 0)


async def test_the_kept_total_follows_writes_deletes_and_owners(store: Store) -> None:
    await fill(store, [f"Card {i}" for i in range(6)])
    await store.put("character", card("Theirs"), owner="bob")

    async def total(owner: str = DEFAULT_OWNER) -> int:
        page = await store.list_page("character", owner=owner, limit=2)  # a full page
        assert page.total == len(await store.list("character", owner=owner))
        return page.total

    assert await total() == 6 and await total("bob") == 1
    card_2 = (await store.get_record("character", "Card 2")).info
    await store.put("character", card("Card 2"), id=card_2.id)  # a replace counts once
    assert await total() == 6
    await store.delete("character", "Card 0")
    await store.delete("character", "Card 1")
    assert await total() == 4
    bob = await store.create_user("bob", "$argon2id$h", owner="bob")
    ada = await store.create_user("ada", "$argon2id$h", owner=DEFAULT_OWNER)
    await store.delete_user(bob.id, hand_over_to=ada.id)
    assert await total() == 5
    assert (await store.list_page("character", owner="bob")).total == 0


async def test_owners_and_kinds_stay_apart(store: Store) -> None:
    await store.put("character", card("Mine"), owner="ada")
    await store.put("character", card("Theirs"), owner="bob")
    assert await names_of(store, owner="ada") == (["Mine"], 1)
    with pytest.raises(StoreError):
        await store.list_page("no_such_kind")


@pytest.mark.parametrize("order", sorted(ORDER_SQL))
@pytest.mark.parametrize("named", [False, True])
async def test_sqlite_reads_a_page_from_an_index_alone(
    sqlite_store: SqliteStore, db_path: Path, order: Any, named: bool
) -> None:
    """Each page's plan is a search of a covering index (no row, whose data is a whole card,
    is read) in the index's order (no sort of every line)."""
    await fill(sqlite_store, ["Ann", "bea"])
    params: tuple[object, ...] = (DEFAULT_OWNER, "character", *(("%a%",) if named else ()))
    with sqlite3.connect(db_path) as db:
        plan = " | ".join(
            str(row[3])
            for row in db.execute(f"EXPLAIN QUERY PLAN {page_sql(order, named)}", (*params, 5, 0))
        )
        counted = " | ".join(
            str(row[3]) for row in db.execute(f"EXPLAIN QUERY PLAN {count_sql(named)}", params)
        )
    assert "COVERING INDEX records_listed_by" in plan, plan
    assert "TEMP B-TREE" not in plan, plan
    if named:
        assert "COVERING INDEX" in counted, counted
    else:  # the kept count: one row
        assert "SEARCH record_counts USING" in counted, counted


# --- the characters' facets (migration 014): favourite flag and tags, kept by triggers ---


def tagged(name: str, *tags: Any, fav: Any = None, v1_fav: Any = None) -> dict[str, Any]:
    made = card(name)
    made["data"]["tags"] = list(tags)
    if fav is not None:
        made["data"]["extensions"] = {"fav": fav}
    if v1_fav is not None:
        made["fav"] = v1_fav
    return made


async def test_tag_and_favourite_filters_and_the_favourites_first_order(store: Store) -> None:
    await store.put("character", tagged("Ann", "Fantasy", " Elf ", fav=True))
    await store.put("character", tagged("bea", "fantasy", "  ", fav="TRUE "))
    await store.put("character", tagged("Cid", "Sci-Fi", "Sci-Fi", fav=False, v1_fav=True))
    await store.put("character", tagged("Dora", v1_fav="true"))  # V1 fav, no tags
    await store.put("character", tagged("Eve", "Elf", fav="no"))
    await store.put("lorebook", {"entries": {}, "tags": ["Fantasy"]}, name="Atlas")
    assert await names_of(store, tags=["FANTASY"]) == (["Ann", "bea"], 2)
    assert await names_of(store, tags=["fantasy", "elf"]) == (["Ann"], 1)
    assert await names_of(store, tags=["elf"], order="name_desc") == (["Eve", "Ann"], 2)
    assert await names_of(store, tags=["nobody"]) == ([], 0)
    assert await names_of(store, fav=True) == (["Ann", "bea", "Dora"], 3)
    assert await names_of(store, fav=False, name_contains="e") == (["Eve"], 1)
    assert await names_of(store, fav=True, tags=["fantasy"], limit=1) == (["Ann"], 2)
    assert await names_of(store, order="fav") == (["Ann", "bea", "Dora", "Cid", "Eve"], 5)
    assert await names_of(store, tags=["fantasy"], limit=1) == (["Ann"], 2)
    assert await names_of(store, tags=["sci-fi"], limit=1) == (["Cid"], 1)
    # each spelling once per card, blank tags left out, other kinds not counted
    assert sorted(await store.character_tags()) == [
        ("Elf", 2),
        ("Fantasy", 1),
        ("Sci-Fi", 1),
        ("fantasy", 1),
    ]


async def test_facets_follow_saves_member_edits_deletes_and_hand_overs(store: Store) -> None:
    ann = await store.put("character", tagged("Ann", "Elf", "Bard"))
    await store.put("character", tagged("Bea", "Elf"), owner="bob")
    assert sorted(await store.character_tags()) == [("Bard", 1), ("Elf", 1)]
    await store.put("character", tagged("Ann", "Elf", "Rogue", fav=True), id=ann.id)
    assert sorted(await store.character_tags()) == [("Elf", 1), ("Rogue", 1)]
    assert await names_of(store, fav=True) == (["Ann"], 1)
    # one member written in place (the favourite toggle, a tag list edit)
    await store.put_record_member("character", "Ann", ["data", "extensions", "fav"], False)
    await store.put_record_member("character", "Ann", ["data", "tags"], ["Elf"])
    assert await names_of(store, fav=True) == ([], 0)
    assert await store.character_tags() == [("Elf", 1)]
    await store.put("character", tagged("Cid", "Elf"))
    assert await names_of(store, tags=["elf"], limit=1) == (["Ann"], 2)  # the kept count
    await store.delete("character", "Cid")
    assert await store.character_tags() == [("Elf", 1)]
    bob = await store.create_user("bob", "$argon2id$h", owner="bob")
    ada = await store.create_user("ada", "$argon2id$h", owner=DEFAULT_OWNER)
    await store.delete_user(bob.id, hand_over_to=ada.id)
    assert await store.character_tags() == [("Elf", 2)]
    assert await store.character_tags(owner="bob") == []
    assert await names_of(store, tags=["ELF"]) == (["Ann", "Bea"], 2)
    await store.delete("character", "Ann")
    await store.delete("character", "Bea")
    assert await store.character_tags() == []


async def test_migration_014_fills_the_facets_and_chat_times_stored_before(db_path: Path) -> None:
    async with await connect_sqlite(db_path, isolation_level=None) as db:
        await apply_migrations(
            db, now=lambda: datetime.now(UTC), migrations=migrations_before("014_character_facets")
        )
        for n, data in enumerate([tagged("Ann", "Elf", fav=True), tagged("Bea", "elf")]):
            await db.execute(
                "INSERT INTO records (id, owner, kind, name, name_key, data, created, updated) "
                "VALUES (?, ?, 'character', ?, ?, ?, ?, ?)",
                (
                    f"r{n}",
                    DEFAULT_OWNER,
                    data["data"]["name"],
                    data["data"]["name"].lower(),
                    json.dumps(data),
                    f"2025-01-0{n + 1}T00:00:00+00:00",
                    f"2025-01-0{n + 1}T00:00:00+00:00",
                ),
            )
        for chat, day in (("c1", 3), ("c2", 5), ("c3", 4)):  # Bea's latest chat: day 5
            await db.execute(
                "INSERT INTO chats (id, owner, character_id, name, header, created, updated) "
                "VALUES (?, ?, 'r1', ?, '{}', ?, ?)",
                (chat, DEFAULT_OWNER, chat, f"2025-01-0{day}", f"2025-01-0{day}"),
            )
    store = await open_store(db_path)
    try:
        assert await names_of(store, order="chatted") == (["Bea", "Ann"], 2)
        await store.delete_chat("c2")
        await store.delete_chat("c1")
        assert await names_of(store, order="chatted", limit=1) == (["Bea"], 2)
        assert sorted(await store.character_tags()) == [("Elf", 1), ("elf", 1)]
        assert await names_of(store, fav=True) == (["Ann"], 1)
        assert await names_of(store, tags=["ELF"]) == (["Ann", "Bea"], 2)
    finally:
        await store.close()


def _plan(db: sqlite3.Connection, sql: str, params: tuple[object, ...]) -> str:
    return " | ".join(str(row[3]) for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", params))


async def test_sqlite_reads_facets_filters_and_the_fav_order_from_indexes(
    sqlite_store: SqliteStore, db_path: Path
) -> None:
    """The favourites-first order and a favourite filter read the fav index alone; a tag
    filter walks an order's index and probes record_tags' key; the counts are kept rows."""
    await sqlite_store.put("character", tagged("Ann", "Elf", fav=True))
    owner = (DEFAULT_OWNER, "character")
    with sqlite3.connect(db_path) as db:
        by_fav = _plan(db, page_sql("fav"), (*owner, 5, 0))
        fav_only = _plan(db, page_sql("name", ListFilter(fav=True)), (*owner, 1, 5, 0))
        tagged_page = _plan(db, page_sql("name", ListFilter(tags=(2,))), (*owner, "a", "b", 5, 0))
        by_tag = _plan(db, count_sql(ListFilter(tags=(1,))), (DEFAULT_OWNER, "Elf"))
        chips = _plan(db, "SELECT tag, n FROM tag_counts WHERE owner = ?", (DEFAULT_OWNER,))
    for plan in (by_fav, fav_only):
        assert "COVERING INDEX records_listed_by_fav" in plan, plan
        assert "TEMP B-TREE" not in plan, plan
    assert "COVERING INDEX records_listed_by_name" in tagged_page, tagged_page
    assert "sqlite_autoindex_record_tags_1" in tagged_page, tagged_page
    assert "TEMP B-TREE" not in tagged_page, tagged_page
    assert "SEARCH tag_counts USING" in by_tag, by_tag
    assert "SEARCH tag_counts USING" in chips, chips


HEADER: dict[str, Any] = {"user_name": "You", "character_name": "x", "chat_metadata": {}}


def said(text: str) -> dict[str, Any]:
    return {"name": "You", "is_user": True, "send_date": "2024-07-12", "mes": text}


async def test_latest_chat_first_follows_chats_written_moved_and_deleted(store: Store) -> None:
    await fill(store, ["Ann", "bea", "Cid", "Dora"])
    await store.put("character", card("Theirs"), owner="bob")
    assert await names_of(store, order="chatted") == (["Ann", "bea", "Cid", "Dora"], 4)
    cid = await store.create_chat(HEADER, [said("hi")], name="c1", character="Cid")
    bea = await store.create_chat(HEADER, [], name="b1", character="bea")
    assert await names_of(store, order="chatted") == (["bea", "Cid", "Ann", "Dora"], 4)
    await store.append_message(cid.id, said("again"))  # a message moves its character first
    assert await names_of(store, order="chatted") == (["Cid", "bea", "Ann", "Dora"], 4)
    # pages across the two parts: chatted (latest first), then the rest by name
    assert await names_of(store, order="chatted", limit=3) == (["Cid", "bea", "Ann"], 4)
    assert await names_of(store, order="chatted", offset=1, limit=2) == (["bea", "Ann"], 4)
    assert await names_of(store, order="chatted", offset=2, limit=1) == (["Ann"], 4)
    assert await names_of(store, order="chatted", offset=3, limit=1) == (["Dora"], 4)
    assert await names_of(store, order="chatted", name_contains="a") == (["bea", "Ann", "Dora"], 3)
    # a deleted chat gives its character the time of its latest other chat, or none
    await store.create_chat(HEADER, [], name="b2", character="bea")
    await store.delete_chat(bea.id)
    assert await names_of(store, order="chatted", limit=2) == (["bea", "Cid"], 4)
    await store.delete_chat(cid.id)
    assert await names_of(store, order="chatted") == (["bea", "Ann", "Cid", "Dora"], 4)
    # a deleted character leaves the order; a handed-over one comes with its chats
    await store.create_chat(HEADER, [], name="t1", character="Theirs", owner="bob")
    await store.delete("character", "bea")
    bob = await store.create_user("bob", "$argon2id$h", owner="bob")
    ada = await store.create_user("ada", "$argon2id$h", owner=DEFAULT_OWNER)
    await store.delete_user(bob.id, hand_over_to=ada.id)
    assert await names_of(store, order="chatted") == (["Theirs", "Ann", "Cid", "Dora"], 4)


async def test_sqlite_reads_the_latest_chat_order_from_indexes(
    sqlite_store: SqliteStore, db_path: Path
) -> None:
    """The chatted part walks character_chats' time index and reads each record by its key;
    the rest walks the name index and probes character_chats' key: no sort of the library."""
    await fill(sqlite_store, ["Ann", "bea"])
    await sqlite_store.create_chat(HEADER, [], name="a1", character="Ann")
    with sqlite3.connect(db_path) as db:
        chatted = _plan(
            db, chatted_sql(ListFilter(), True), (DEFAULT_OWNER, DEFAULT_OWNER, "character", 5, 0)
        )
        rest = _plan(db, chatted_sql(ListFilter(), False), (DEFAULT_OWNER, "character", 5, 0))
    assert "character_chats USING COVERING INDEX character_chats_by_time" in chatted, chatted
    assert "SEARCH records USING INDEX sqlite_autoindex_records_1" in chatted, chatted
    assert "COVERING INDEX records_listed_by_name" in rest, rest
    assert "TEMP B-TREE" not in rest, rest


# --- which of a page's records have a blob (a character's avatar) ---


async def test_records_with_blob_names_those_of_the_ids_that_have_it(store: Store) -> None:
    pictured = await store.put("character", card("Ann"), blobs={"avatar": b"png"})
    plain = await store.put("character", card("Bea"))
    other_blob = await store.put("character", card("Cid"), blobs={"asset:icon": b"png"})
    theirs = await store.put("character", card("Dora"), owner="bob", blobs={"avatar": b"png"})
    book = await store.put("lorebook", {"entries": {}}, name="Atlas", blobs={"avatar": b"png"})
    ids = [pictured.id, plain.id, other_blob.id, theirs.id, book.id, "no-such-id", pictured.id]
    assert await store.records_with_blob("character", ids) == {pictured.id}
    assert await store.records_with_blob("character", ids, "asset:icon") == {other_blob.id}
    assert await store.records_with_blob("character", ids, owner="bob") == {theirs.id}
    assert await store.records_with_blob("lorebook", ids) == {book.id}
    assert await store.records_with_blob("character", []) == set()
    # it follows the blob's upload and removal and the record's deletion
    await store.set_blob("character", plain.id, "avatar", b"png")
    await store.set_blob("character", pictured.id, "avatar", None)
    assert await store.records_with_blob("character", ids) == {plain.id}
    await store.delete("character", plain.id)
    assert await store.records_with_blob("character", ids) == set()
    with pytest.raises(StoreError):
        await store.records_with_blob("no_such_kind", ids)


async def test_records_with_blob_asks_once_for_a_page_and_once_per_chunk_beyond(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    refs = [
        await store.put("character", card(f"Card {i}"), blobs={"avatar": b"png"} if i % 2 else None)
        for i in range(7)
    ]
    ids = [ref.id for ref in refs]
    seen: list[str] = []
    async with store.trace(seen.append):
        assert await store.records_with_blob("character", ids) == set(ids[1::2])
    assert sum("record_blobs" in sql for sql in seen) == 1, seen
    assert not [sql for sql in seen if sql.startswith("BEGIN")], seen  # one statement: no snapshot
    monkeypatch.setattr(_sqlite_listing, "IDS_PER_QUERY", 3)
    seen.clear()
    async with store.trace(seen.append):
        assert await store.records_with_blob("character", ids) == set(ids[1::2])
    assert sum("record_blobs" in sql for sql in seen) == 3, seen


async def test_sqlite_finds_a_pages_blobs_by_primary_keys(
    sqlite_store: SqliteStore, db_path: Path
) -> None:
    """Each id of a page probes record_blobs' key (record id, name) and the record's by its
    id: never a walk of the owner's records (a join of a page of 20 ids walked the listing
    index, 3.7 ms at 5,000 cards)."""
    await sqlite_store.put("character", card("Ann"), blobs={"avatar": b"png"})
    params = (*(f"id {i}" for i in range(20)), "avatar", DEFAULT_OWNER, "character")
    with sqlite3.connect(db_path) as db:
        plan = _plan(db, with_blob_sql(20), params)
    assert plan.startswith("SEARCH b USING COVERING INDEX sqlite_autoindex_record_blobs_1"), plan
    assert "SEARCH r USING INDEX sqlite_autoindex_records_1 (id=?)" in plan, plan
    assert "SCAN" not in plan and "records_listed" not in plan, plan
