"""The streaming store sink under flush and cleanup: a timed write already under way is waited
for, never cancelled (real SQLite; the flush is fired from the statement trace at the timed
write's ``BEGIN``)."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

from tavernkit.chat.sink import StoreSink
from tavernkit.errors import NotFound
from tavernkit.models.chat import Message
from tavernkit.providers.events import TextDelta
from tavernkit.store import SqliteStore, open_store


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def _sink(store: SqliteStore, clock: Clock) -> StoreSink:
    info = await store.create_chat({"chat_metadata": {}}, name="c")
    message = Message.new("Mira", "", is_user=False, send_date="now")
    message.ensure_swipes()
    stored = await store.append_message(info.id, message)
    return StoreSink(store, stored.id, 0, message, min_interval=0.05, clock=clock)


@pytest.mark.parametrize("end", ["flush", "cleanup"])
async def test_flush_and_cleanup_wait_for_a_timed_write_under_way(tmp_path: Path, end: str) -> None:
    store = await open_store(tmp_path / "s.db")
    try:
        clock = Clock()
        sink = await _sink(store, clock)
        await sink.emit(TextDelta("One"))  # written at once
        await sink.emit(TextDelta(" two"))  # inside the interval: a timer will write it
        seen: list[str] = []
        begun = asyncio.Event()
        loop = asyncio.get_running_loop()

        def each(sql: str) -> None:
            seen.append(sql)
            if sql == "BEGIN IMMEDIATE":
                loop.call_soon_threadsafe(begun.set)

        async with store.trace(each):
            await asyncio.wait_for(begun.wait(), 5)  # the timer's write has begun
            await (sink.flush() if end == "flush" else sink.cleanup())
        assert "ROLLBACK" not in seen  # the timed write was not cut off
        assert seen.count("COMMIT") == seen.count("BEGIN IMMEDIATE") >= 1
        got = await store.get_message(sink.message_id)
        assert (got.data["mes"], got.partial_swipes) == ("One two", (0,))
        await store.update_swipe_text(sink.message_id, 0, "One two.", complete=True)
    finally:
        await store.close()


async def test_a_flush_stops_a_timer_that_is_still_waiting(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "s.db")
    try:
        clock = Clock()
        sink = await _sink(store, clock)
        sink.min_interval = 60.0  # the timer would wait a minute
        await sink.emit(TextDelta("One"))
        await sink.emit(TextDelta(" two"))
        timer = sink._timer
        assert timer is not None and not timer.done()
        await asyncio.wait_for(sink.flush(), 5)  # no minute-long wait: the timer is stopped
        assert timer.cancelled()
        assert (await store.get_message(sink.message_id)).data["mes"] == "One two"
    finally:
        await store.close()


async def test_a_timed_write_that_failed_is_raised_by_the_next_flush(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await open_store(tmp_path / "s.db")
    try:
        clock = Clock()
        sink = await _sink(store, clock)
        await sink.emit(TextDelta("One"))
        info = (await store.list_chats())[0]
        await store.truncate_chat(info.id, 0)  # the message is gone: the timed write fails
        await sink.emit(TextDelta(" two"))
        for _ in range(500):
            if sink._timer is not None and sink._timer.done():
                break
            await asyncio.sleep(0.01)
        with pytest.raises(NotFound):
            await sink.flush()
        gc.collect()  # an error nobody retrieved would be logged now, by asyncio
        assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
    finally:
        await store.close()
