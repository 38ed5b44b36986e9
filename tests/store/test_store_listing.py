"""A page of a record listing (``Store.list_page``): its orders, name filter and total on both
backends, and that SQLite reads it from the listing indexes alone (migration 011), never the
records' rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tavernkit.errors import StoreError
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
    params: tuple[object, ...] = ("local", "character", *(("%a%",) if named else ()))
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
    assert "COVERING INDEX" in counted, counted
