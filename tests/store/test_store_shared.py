"""``get_shared``: one validated model per record revision, a new one after every write."""

from __future__ import annotations

from pathlib import Path

import pytest

from tavernkit.errors import Conflict, NotFound
from tavernkit.models.lorebook import Lorebook
from tavernkit.store import SqliteStore, open_store

BOOK = {"entries": {"0": {"uid": 0, "key": ["bell"], "content": "The bell rings."}}}


async def test_the_same_revision_gives_the_same_model_by_id_and_by_name(
    store: SqliteStore,
) -> None:
    ref = await store.put("lorebook", BOOK, name="Coast")
    first = await store.get_shared("lorebook", "Coast")
    assert isinstance(first, Lorebook)
    assert await store.get_shared("lorebook", ref.id) is first
    assert first == await store.get("lorebook", "Coast")


async def test_a_write_bumps_the_revision_and_the_next_read_sees_it(store: SqliteStore) -> None:
    ref = await store.put("lorebook", BOOK, name="Coast")
    before = await store.get_shared("lorebook", "Coast")
    edited = {"entries": {"0": {**BOOK["entries"]["0"], "content": "The bell is silent."}}}
    await store.put("lorebook", edited, name="Coast", id=ref.id)
    after = await store.get_shared("lorebook", "Coast")
    assert after is not before
    assert isinstance(after, Lorebook) and after.to_wire() == edited


async def test_a_deleted_record_is_not_served_from_memory(store: SqliteStore) -> None:
    ref = await store.put("lorebook", BOOK, name="Coast")
    old = await store.get_shared("lorebook", "Coast")
    await store.delete("lorebook", ref.id)
    with pytest.raises(NotFound):
        await store.get_shared("lorebook", "Coast")
    # re-created under the same id: a fresh model, not the one of the deleted record
    await store.put("lorebook", {"entries": {}}, name="Coast", id=ref.id)
    fresh = await store.get_shared("lorebook", ref.id)
    assert fresh is not old
    assert isinstance(fresh, Lorebook) and fresh.to_wire() == {"entries": {}}


async def test_another_process_sees_the_edits_of_this_one(db_path: Path) -> None:
    async with await open_store(db_path) as a, await open_store(db_path) as b:
        ref = await a.put("lorebook", BOOK, name="Coast")
        seen = await b.get_shared("lorebook", "Coast")
        await a.put("lorebook", {"entries": {}}, name="Coast", id=ref.id)
        now = await b.get_shared("lorebook", "Coast")
        assert now is not seen
        assert isinstance(now, Lorebook) and now.to_wire() == {"entries": {}}


async def test_shared_records_are_read_at_once_and_are_the_single_reads_models(
    store: SqliteStore,
) -> None:
    book = await store.put("lorebook", BOOK, name="Coast")
    await store.put("persona", {"name": "Ada", "description": "A sailor."}, name="Ada")
    single = await store.get_shared("lorebook", "Coast")
    async with store.trace() as stats:
        found = await store.get_shared_records(
            [("lorebook", book.id), ("persona", "Ada"), ("lorebook", "Missing"), ("persona", "")]
        )
    # the book is cached: one revision check for all, one read of the persona's JSON
    assert stats.statements == 2
    assert set(found) == {("lorebook", book.id), ("persona", "Ada")}
    assert found[("lorebook", book.id)].model is single
    assert found[("lorebook", book.id)].id == book.id
    assert found[("persona", "Ada")].model == await store.get("persona", "Ada")
    async with store.trace() as stats:
        again = await store.get_shared_records([("persona", "Ada"), ("lorebook", "Coast")])
    assert stats.statements == 1  # nothing changed: the revision check alone
    assert again[("persona", "Ada")].model is found[("persona", "Ada")].model


async def test_shared_records_see_another_process_edit_and_delete(db_path: Path) -> None:
    async with await open_store(db_path) as a, await open_store(db_path) as b:
        ref = await a.put("lorebook", BOOK, name="Coast")
        seen = (await b.get_shared_records([("lorebook", "Coast")]))[("lorebook", "Coast")]
        await a.put("lorebook", {"entries": {}}, name="Coast", id=ref.id)
        now = (await b.get_shared_records([("lorebook", "Coast")]))[("lorebook", "Coast")]
        assert now.model is not seen.model
        assert isinstance(now.model, Lorebook) and now.model.to_wire() == {"entries": {}}
        await a.delete("lorebook", ref.id)
        assert await b.get_shared_records([("lorebook", "Coast")]) == {}


async def test_shared_records_refuse_a_name_two_records_share(store: SqliteStore) -> None:
    await store.put("persona", {"name": "Ada"}, name="Ada")
    await store.put("persona", {"name": "Ada"}, name="Ada")
    with pytest.raises(Conflict):
        await store.get_shared_records([("persona", "Ada")])


async def test_a_ref_asked_again_with_nothing_committed_reads_no_record(
    sqlite_store: SqliteStore,
) -> None:
    store = sqlite_store
    await store.put("lorebook", BOOK, name="Coast")
    first = await store.get_shared_record("lorebook", "Coast")
    seen: list[str] = []
    async with store.trace(seen.append) as stats:
        again = await store.get_shared_record("lorebook", "Coast")
    assert again is first
    # the file's change counter alone, no look at the records table
    assert stats.statements == 1 and seen == ["PRAGMA data_version"]
    # any commit (here: another record's) makes the next call look again, and answer the same
    await store.put("persona", {"name": "Ada"}, name="Ada")
    async with store.trace() as stats:
        after = await store.get_shared_record("lorebook", "Coast")
    assert after is first and stats.statements == 2


async def test_a_ref_answered_before_another_process_wrote_is_looked_up_again(
    db_path: Path,
) -> None:
    async with await open_store(db_path) as a, await open_store(db_path) as b:
        ref = await a.put("lorebook", BOOK, name="Coast")
        for _ in range(2):  # the second answer is b's memory of the first
            seen = await b.get_shared_record("lorebook", "Coast")
        await a.put("lorebook", {"entries": {}}, name="Coast", id=ref.id)
        now = await b.get_shared_record("lorebook", "Coast")
        assert now.model is not seen.model and now.data == {"entries": {}}
        await a.delete("lorebook", ref.id)
        with pytest.raises(NotFound):
            await b.get_shared_record("lorebook", "Coast")
