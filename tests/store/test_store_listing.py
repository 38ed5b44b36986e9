"""A page of a record listing (``Store.list_page``): its orders, name filter and total on both
backends, and that SQLite reads it from the listing indexes alone (migration 011), never the
records' rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tavernkit.errors import StoreError
from tavernkit.models._base import DEFAULT_OWNER
from tavernkit.store import SqliteStore, Store
from tavernkit.store._sqlite_listing import ORDER_SQL, count_sql, page_sql


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
