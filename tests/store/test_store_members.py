"""One member of a record's JSON read, set and removed (``get_record_member``,
``record_member_keys``, ``put_record_member``, ``delete_record_member``) and the record's text
read as stored (``get_record_text``): the rest of the record keeps its keys, their order and
their values; each write bumps the revision, so the shared model follows; another owner's
record is not found."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from tavernkit.errors import NotFound
from tavernkit.models.lorebook import Lorebook, entry_template
from tavernkit.store import SqliteStore, Store
from tavernkit.store.postgres import PostgresStore


def _book() -> dict[str, Any]:
    return {
        "name": "Coast",
        "entries": {
            "0": {"uid": 0, "key": ["lamp"], "content": "The lamp is lit at dusk.", "zz": 1},
            "2": {"uid": 2, "key": ["tide"], "content": "Spring tides run high – ünïcode."},
        },
        "extensions": {"vendor": [1, 2.5, None]},
    }


async def _put(store: Store) -> str:
    return (await store.put("lorebook", _book(), name="Coast")).id


async def test_a_member_is_read_and_the_keys_listed_in_order(store: Store) -> None:
    book = await _put(store)
    assert (
        await store.get_record_member("lorebook", book, ("entries", "2"))
        == (_book()["entries"]["2"])
    )
    assert await store.record_member_keys("lorebook", "Coast", ("entries",)) == ["0", "2"]
    assert await store.record_member_keys("lorebook", book, ("nothing",)) == []
    with pytest.raises(NotFound):
        await store.get_record_member("lorebook", book, ("entries", "1"))
    info, text = await store.get_record_text("lorebook", book)
    assert info.id == book and json.loads(text) == _book()


async def test_a_put_replaces_in_place_or_adds_last_and_keeps_the_rest(store: Store) -> None:
    book = await _put(store)
    before = await store.get_shared("lorebook", book)
    changed = {"uid": 0, "key": ["lamp", "light"], "content": "Lit.", "zz": 1}
    await store.put_record_member("lorebook", book, ("entries", "0"), changed)
    await store.put_record_member("lorebook", book, ("entries", "1"), {"uid": 1, "key": ["x"]})
    data = (await store.get_record("lorebook", book)).data
    want = _book()
    want["entries"]["0"] = changed
    want["entries"]["1"] = {"uid": 1, "key": ["x"]}
    assert data == want
    assert list(data) == ["name", "entries", "extensions"]
    assert list(data["entries"]) == ["0", "2", "1"]
    # the revision moved: the shared model is the new one
    after = await store.get_shared("lorebook", book)
    assert after is not before and isinstance(after, Lorebook)
    assert after.entries["0"].content == "Lit."


async def test_a_delete_removes_the_member_and_a_missing_one_is_not_found(store: Store) -> None:
    book = await _put(store)
    await store.delete_record_member("lorebook", book, ("entries", "0"))
    assert list((await store.get_record("lorebook", book)).data["entries"]) == ["2"]
    with pytest.raises(NotFound):
        await store.delete_record_member("lorebook", book, ("entries", "0"))
    with pytest.raises(NotFound):
        await store.put_record_member("lorebook", "no such book", ("entries", "0"), {})


async def test_a_missing_parent_is_made_and_an_odd_key_still_works(store: Store) -> None:
    book = (await store.put("lorebook", {"name": "Bare"}, name="Bare")).id
    await store.put_record_member("lorebook", book, ("entries", "0"), {"uid": 0})
    # a quote in a key: no JSON path names it, the record is edited in Python instead
    await store.put_record_member("lorebook", book, ("entries", 'say "hi"'), {"uid": 7})
    assert await store.record_member_keys("lorebook", book, ("entries",)) == ["0", 'say "hi"']
    assert await store.get_record_member("lorebook", book, ("entries", 'say "hi"')) == {"uid": 7}
    await store.delete_record_member("lorebook", book, ("entries", 'say "hi"'))
    assert (await store.get_record("lorebook", book)).data == {
        "name": "Bare",
        "entries": {"0": {"uid": 0}},
    }


async def test_scalars_come_back_as_json_values(store: Store) -> None:
    book = await _put(store)
    await store.put_record_member("lorebook", book, ("entries", "0", "constant"), True)
    await store.put_record_member("lorebook", book, ("entries", "0", "group"), None)
    member = ("entries", "0")
    assert await store.get_record_member("lorebook", book, (*member, "constant")) is True
    assert await store.get_record_member("lorebook", book, (*member, "group")) is None
    assert await store.get_record_member("lorebook", book, (*member, "zz")) == 1
    assert await store.get_record_member("lorebook", book, (*member, "content")) == (
        "The lamp is lit at dusk."
    )


async def test_writes_sent_together_all_land(store: Store) -> None:
    """Member writes at once (PostgreSQL: on several pooled connections, each row-locked in
    turn; a quote in the key sends SQLite's through the parse-and-encode path too)."""
    book = await _put(store)
    await asyncio.gather(
        *(
            store.put_record_member("lorebook", book, ("entries", f'n"{i}'), {"uid": i})
            for i in range(12)
        )
    )
    keys = await store.record_member_keys("lorebook", book, ("entries",))
    assert sorted(keys) == sorted(["0", "2", *(f'n"{i}' for i in range(12))])


async def test_another_owners_record_is_not_found(store: Store) -> None:
    book = await _put(store)
    for call in (
        store.get_record_member("lorebook", book, ("entries", "0"), owner="eve"),
        store.record_member_keys("lorebook", book, ("entries",), owner="eve"),
        store.put_record_member("lorebook", book, ("entries", "0"), {}, owner="eve"),
        store.delete_record_member("lorebook", book, ("entries", "0"), owner="eve"),
        store.get_record_text("lorebook", book, owner="eve"),
    ):
        with pytest.raises(NotFound):
            await call
    assert (await store.get_record("lorebook", book)).data == _book()


async def test_one_entry_of_a_big_book_is_written_while_the_loop_keeps_running(
    store: Store,
) -> None:
    """A 20,000-entry book (SillyTavern's entry fields, ~1.2 KB an entry): writing one entry
    leaves the rest as it was, and on SQLite the row's rewrite runs in SQLite with the GIL
    released, so the event loop keeps ticking throughout (the old path parsed, validated and
    encoded the whole book on the loop: seconds)."""
    template = {k: v for k, v in entry_template().items()}
    entries = {
        str(i): {"uid": i, **template, "key": [f"k{i}"], "content": f"Lore {i}. " + "Fill. " * 60}
        for i in range(20_000)
    }
    book = (await store.put("lorebook", {"entries": entries}, name="Atlas")).id
    gaps: list[float] = []

    async def tick() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.002)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.01)
    started = time.perf_counter()
    await store.put_record_member("lorebook", book, ("entries", "123"), {"uid": 123, "key": []})
    took = time.perf_counter() - started
    ticker.cancel()
    longest = max(gaps)
    print(f"\none entry of 20,000: {took * 1000:.0f} ms; the loop waited {longest * 1000:.0f} ms")
    stored = (await store.get_record("lorebook", book)).data["entries"]
    assert stored["123"] == {"uid": 123, "key": []} and stored["124"] == entries["124"]
    assert len(stored) == 20_000
    if isinstance(store, SqliteStore) and not isinstance(store, PostgresStore):
        assert longest < max(0.05, took / 3), (longest, took)
