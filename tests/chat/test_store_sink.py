"""The streaming store sink under flush and cleanup: a timed write already under way is waited
for, never cancelled (real SQLite; the flush is fired from the statement trace at the timed
write's ``BEGIN``)."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

from tavernkit.chat.sink import StoreSink, TeeSink
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
        await sink.emit(TextDelta("One"))  # written on the clock's next tick
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


class Shown:
    """The next sink after the store: what the client was shown, and how many store
    statements had run when each piece reached it."""

    def __init__(self, stats: list[str]) -> None:
        self.stats = stats
        self.text = ""
        self.writes_before: list[int] = []

    async def emit(self, event: object) -> None:
        if isinstance(event, TextDelta):
            self.text += event.text
            self.writes_before.append(sum(1 for s in self.stats if s.startswith("UPDATE swipes")))

    async def flush(self) -> None:
        return None

    async def finalize(self, result: object) -> None:
        return None

    async def cleanup(self) -> None:
        return None


async def test_a_piece_is_shown_before_it_is_written_and_stored_by_the_end(
    tmp_path: Path,
) -> None:
    store = await open_store(tmp_path / "s.db")
    try:
        sink = await _sink(store, Clock())
        seen: list[str] = []
        shown = Shown(seen)
        tee = TeeSink([sink, shown])
        async with store.trace(seen.append):
            await tee.emit(TextDelta("One"))
            # the client has the first piece, and no store write ran in front of it
            assert (shown.text, shown.writes_before) == ("One", [0])
            for piece in (" two", " three"):
                await tee.emit(TextDelta(piece))
            await tee.flush()  # the turn's end (also a stop): what was shown is stored
        got = await store.get_message(sink.message_id)
        assert (got.data["mes"], got.partial_swipes) == ("One two three", (0,))
    finally:
        await store.close()


async def test_pieces_that_arrive_during_a_write_are_written_without_another_piece(
    tmp_path: Path,
) -> None:
    store = await open_store(tmp_path / "s.db")
    try:
        sink = await _sink(store, Clock())
        begun = asyncio.Event()
        loop = asyncio.get_running_loop()

        def each(sql: str) -> None:
            if sql == "BEGIN IMMEDIATE":
                loop.call_soon_threadsafe(begun.set)

        async with store.trace(each):
            await sink.emit(TextDelta("One"))
            await asyncio.wait_for(begun.wait(), 5)  # the background write of "One" runs
            await sink.emit(TextDelta(" two"))  # arrives during it: no new writer is started
        for _ in range(500):  # the writer's next round (one interval later) stores it
            if (await store.get_message(sink.message_id)).data["mes"] == "One two":
                break
            await asyncio.sleep(0.01)
        assert (await store.get_message(sink.message_id)).data["mes"] == "One two"
        assert sink._timer is not None
        await asyncio.wait_for(sink._timer, 5)  # and then the writer ends: nothing new
    finally:
        await store.close()
