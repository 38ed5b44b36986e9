"""The store's one swipe writer: the streaming writes of many turns in few transactions, each
turn with its own result (real SQLite)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tavernkit.chat.sink import StoreSink
from tavernkit.chat.swipe_writer import SwipeWriter, swipe_writer
from tavernkit.errors import NotFound, StoreError
from tavernkit.models.chat import Message
from tavernkit.providers.events import TextDelta
from tavernkit.store import SqliteStore, open_store
from tavernkit.store.chat_types import SwipeText


async def _sinks(store: SqliteStore, n: int, writer: SwipeWriter | None = None) -> list[StoreSink]:
    sinks = []
    for i in range(n):
        info = await store.create_chat({"chat_metadata": {}}, name=f"c{i}")
        message = Message.new("Mira", "", is_user=False, send_date="now")
        message.ensure_swipes()
        stored = await store.append_message(info.id, message)
        sinks.append(StoreSink(store, stored.id, 0, message, writer=writer or swipe_writer(store)))
    return sinks


async def test_the_pieces_of_many_streaming_turns_share_transactions(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "s.db")
    try:
        sinks = await _sinks(store, 40)
        writer = swipe_writer(store)
        assert swipe_writer(store) is writer  # one per store
        begun: list[str] = []
        async with store.trace(lambda sql: begun.append(sql) if sql == "BEGIN IMMEDIATE" else 0):
            for round_ in range(3):  # every turn gets a piece, all in one tick
                await asyncio.gather(*(s.emit(TextDelta(f"{round_} ")) for s in sinks))
                await asyncio.gather(*(s.flush() for s in sinks))
        assert writer.writes == 40 * 3
        assert len(begun) == writer.batches < 20  # 120 swipe writes, a few transactions
        for sink in sinks:
            got = await store.get_message(sink.message_id)
            assert (got.data["mes"], got.partial_swipes) == ("0 1 2 ", (0,))
    finally:
        await store.close()


async def test_a_missing_swipe_fails_its_own_write_only(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "s.db")
    try:
        [one, two] = await _sinks(store, 2)
        writer = swipe_writer(store)
        results = await asyncio.gather(
            writer.write(SwipeText(one.message_id, 0, "kept")),
            writer.write(SwipeText(two.message_id, 5, "no such swipe")),
            writer.write(SwipeText(two.message_id, 0, "not theirs", owner="bob")),
            return_exceptions=True,
        )
        assert results[0] is None
        assert isinstance(results[1], NotFound) and isinstance(results[2], NotFound)
        assert writer.batches == 1  # the three came in one tick: one transaction
        assert (await store.get_message(one.message_id)).data["mes"] == "kept"
        assert (await store.get_message(two.message_id)).data["mes"] == ""
    finally:
        await store.close()


async def test_a_batch_that_failed_is_written_one_by_one(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "s.db")
    try:
        [one, two] = await _sinks(store, 2)
        writer = swipe_writer(store)
        batches: list[int] = []

        async def failing(items: object) -> list[int]:
            batches.append(1)
            raise StoreError("the batch's transaction failed")

        store.update_swipe_texts = failing  # type: ignore[method-assign]
        results = await asyncio.gather(
            writer.write(SwipeText(one.message_id, 0, "one")),
            writer.write(SwipeText(two.message_id, 3, "no such swipe")),
            return_exceptions=True,
        )
        assert batches == [1]
        assert results[0] is None and isinstance(results[1], NotFound)  # each on its own
        assert (await store.get_message(one.message_id)).data["mes"] == "one"
    finally:
        await store.close()


async def test_a_batch_that_failed_fails_every_write_in_it(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "s.db")
    [one, two] = await _sinks(store, 2)
    writer = swipe_writer(store)
    await store.close()  # every write of the next batch fails
    results = await asyncio.gather(
        writer.write(SwipeText(one.message_id, 0, "a")),
        writer.write(SwipeText(two.message_id, 0, "b")),
        return_exceptions=True,
    )
    assert all(isinstance(r, Exception) and not isinstance(r, NotFound) for r in results)
    with pytest.raises(type(results[0])):
        await one.flush()  # the turn sees the store's error, as it did without the writer


async def test_a_writer_cancelled_leaves_no_write_waiting(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "s.db")
    try:
        [one] = await _sinks(store, 1)
        writer = swipe_writer(store)
        waiting = asyncio.ensure_future(writer.write(SwipeText(one.message_id, 0, "a")))
        await asyncio.sleep(0)  # the write is queued and its batch's runner started
        assert writer._runner is not None
        writer._runner.cancel()  # as the loop's shutdown does
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(waiting, 5)  # ended, not hanging
    finally:
        await store.close()


async def test_background_writes_of_several_ticks_share_one_transaction(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "s.db")
    try:
        sinks = await _sinks(store, 3)
        writer = swipe_writer(store)
        writes = []
        for n, sink in enumerate(sinks):  # one write per turn of the loop, within the window
            writes.append(asyncio.ensure_future(writer.write(SwipeText(sink.message_id, 0, "x"))))
            for _ in range(n + 2):
                await asyncio.sleep(0)
        await asyncio.gather(*writes)
        assert (writer.batches, writer.writes) == (1, 3)
        for sink in sinks:
            assert (await store.get_message(sink.message_id)).data["mes"] == "x"
    finally:
        await store.close()


async def test_a_write_someone_waits_on_does_not_wait_out_the_window(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "s.db")
    try:
        [one, two] = await _sinks(store, 2)
        writer = SwipeWriter(store, window_s=3600)
        background = asyncio.ensure_future(writer.write(SwipeText(one.message_id, 0, "later")))
        await asyncio.sleep(0)
        await asyncio.wait_for(writer.write(SwipeText(two.message_id, 0, "now"), now=True), 5)
        assert background.done()  # queued before it: it went along, in the same transaction
        assert writer.batches == 1
        assert (await store.get_message(one.message_id)).data["mes"] == "later"
        assert (await store.get_message(two.message_id)).data["mes"] == "now"
    finally:
        await store.close()


async def test_a_turn_that_ends_hurries_its_write_under_way(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "s.db")
    try:
        [sink] = await _sinks(store, 1, SwipeWriter(store, window_s=3600))
        await sink.emit(TextDelta("Hel"))  # its background round waits in the writer's window
        for _ in range(3):
            await asyncio.sleep(0)
        await sink.emit(TextDelta("lo"))
        await asyncio.wait_for(sink.flush(), 5)  # not an hour
        got = await store.get_message(sink.message_id)
        assert (got.data["mes"], got.partial_swipes) == ("Hello", (0,))
    finally:
        await store.close()


async def test_turns_started_apart_store_their_texts_on_the_same_ticks(tmp_path: Path) -> None:
    """After its first piece (at once), a turn's text is stored on ticks of one clock for
    every turn, so two turns that started 70 ms apart share the writer's batches (its own
    window, 10 ms here, is too short to join them)."""
    store = await open_store(tmp_path / "s.db")
    try:
        writer = SwipeWriter(store, window_s=0.01)
        sinks = await _sinks(store, 2, writer)

        async def stream(sink: StoreSink, delay: float) -> None:
            await asyncio.sleep(delay)
            for n in range(60):
                await sink.emit(TextDelta(f"{n} "))
                await asyncio.sleep(0.01)
            await sink.flush()

        await asyncio.gather(stream(sinks[0], 0.0), stream(sinks[1], 0.07))
        assert writer.batches < writer.writes * 0.8, (writer.batches, writer.writes)
        for sink in sinks:
            got = await store.get_message(sink.message_id)
            assert got.data["mes"] == "".join(f"{n} " for n in range(60))
    finally:
        await store.close()
