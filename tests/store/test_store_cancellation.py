"""A cancelled write never poisons the store: cancelled at any statement of a transaction
(``BEGIN`` included, and again during the rollback), the write is all or nothing and the
next write succeeds. Real SQLite; the cancellation is fired from the statement trace, so it
lands at an exact point of the write."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tavernkit.store import SqliteStore

#: SQLite only (tests/store/conftest.py): the cancellation fires from SQLite's statement trace,
#: on its thread, mid-statement; tests/store/test_store_postgres.py cancels PostgreSQL writes.
BACKENDS = ("sqlite",)

Write = Callable[[], Awaitable[object]]


async def _chat(store: SqliteStore) -> str:
    info = await store.create_chat(
        {"chat_metadata": {}},
        [{"name": "A", "is_user": False, "mes": "old", "swipes": ["old"], "swipe_id": 0}],
        name="c",
    )
    return (await store.load_chat(info.id)).messages[0].id


async def _statements(store: SqliteStore, write: Write) -> list[str]:
    seen: list[str] = []
    async with store.trace(seen.append):
        await write()
    return seen


async def _cancel_at(store: SqliteStore, write: Write, at: int, *, again: bool) -> bool:
    """Run ``write`` and cancel it when its statement number ``at`` starts (``again``: cancel
    it a second time when its ROLLBACK starts). Whether the cancellation reached the caller."""
    loop = asyncio.get_running_loop()
    task: asyncio.Task[object] | None = None
    count = 0

    def each(sql: str) -> None:
        nonlocal count
        count += 1
        if task is not None and (count == at or (again and sql == "ROLLBACK")):
            loop.call_soon_threadsafe(task.cancel)

    async with store.trace(each):
        task = asyncio.create_task(write())  # type: ignore[arg-type]
        try:
            await task
        except asyncio.CancelledError:
            return True
    return False


@pytest.mark.parametrize("again", [False, True], ids=["once", "during-rollback-too"])
async def test_a_swipe_write_cancelled_at_any_statement_leaves_the_store_usable(
    store: SqliteStore, again: bool
) -> None:
    mid = await _chat(store)

    def write(text: str) -> Write:
        return lambda: store.update_swipe_text(mid, 0, text, complete=True)

    total = len(await _statements(store, write("warm")))
    assert total >= 4  # BEGIN, two updates at least, COMMIT
    for at in range(1, total + 1):
        before = (await store.get_message(mid)).data["mes"]
        text = f"new {at}"
        cancelled = await _cancel_at(store, write(text), at, again=again)
        assert cancelled, at
        # all or nothing: a COMMIT that had started may have landed
        assert (await store.get_message(mid)).data["mes"] in (before, text), at
        # the next write starts clean
        await store.update_swipe_text(mid, 0, f"after {at}", complete=False)
        got = await store.get_message(mid)
        assert (got.data["mes"], got.partial_swipes) == (f"after {at}", (0,)), at


async def test_an_append_cancelled_right_after_begin_stores_nothing(store: SqliteStore) -> None:
    mid = await _chat(store)
    chat_id = (await store.list_chats())[0].id
    message = {"name": "U", "is_user": True, "mes": "hi"}
    assert await _cancel_at(store, lambda: store.append_message(chat_id, message), 1, again=False)
    await store.append_message(chat_id, {**message, "mes": "second"})
    stored = await store.load_chat(chat_id)
    assert [m.data["mes"] for m in stored.messages] == ["old", "second"]
    assert stored.messages[0].id == mid


async def test_writes_queued_behind_a_cancelled_one_all_succeed(store: SqliteStore) -> None:
    mid = await _chat(store)
    loop = asyncio.get_running_loop()
    victim: asyncio.Task[None] | None = None

    def each(sql: str) -> None:
        if sql == "BEGIN IMMEDIATE" and victim is not None and not victim.done():
            loop.call_soon_threadsafe(victim.cancel)

    async with store.trace(each):
        victim = asyncio.create_task(store.update_swipe_text(mid, 0, "lost", complete=True))
        others = [
            asyncio.create_task(store.update_swipe_text(mid, 0, f"w{i}", complete=True))
            for i in range(5)
        ]
        results = await asyncio.gather(victim, *others, return_exceptions=True)
    assert isinstance(results[0], asyncio.CancelledError)
    assert results[1:] == [None] * 5
    assert (await store.get_message(mid)).data["mes"] == "w4"


async def test_a_detached_append_runs_to_its_end_in_one_trip(store: SqliteStore) -> None:
    """``detached=True`` (a turn's reply place, which the turn shields): the whole
    transaction goes to the store's thread at once, and a caller cancelled at its first
    statement stops waiting while the write still lands whole; the next write starts clean."""
    await _chat(store)
    chat_id = (await store.list_chats())[0].id
    conn = store._conn
    trips: list[object] = []
    real = conn.run

    async def counted(fn: Any) -> Any:
        trips.append(fn)
        return await real(fn)

    pair = [{"name": "U", "is_user": True, "mes": "q"}, {"name": "A", "mes": "", "swipes": [""]}]
    conn.run = counted  # type: ignore[method-assign]
    try:
        stored = await store.append_messages(chat_id, pair, last_partial=(0,), detached=True)
        assert len(trips) == 1  # BEGIN, the SELECT, the inserts, the touch and COMMIT
        assert [m.position for m in stored] == [1, 2]

        def append() -> Awaitable[object]:
            return store.append_messages(chat_id, pair, last_partial=(0,), detached=True)

        assert await _cancel_at(store, append, 1, again=False)
    finally:
        conn.run = real  # type: ignore[method-assign]
    await store.append_message(chat_id, {"name": "U", "is_user": True, "mes": "next"})
    messages = (await store.load_chat(chat_id)).messages
    assert [m.data["mes"] for m in messages] == ["old", "q", "", "q", "", "next"]
    assert messages[2].partial_swipes == messages[4].partial_swipes == (0,)


async def test_a_detached_append_that_fails_stores_nothing(store: SqliteStore) -> None:
    from tavernkit.errors import NotFound

    await _chat(store)
    chat_id = (await store.list_chats())[0].id
    with pytest.raises(NotFound):
        await store.append_messages("no-such-chat", [{"name": "U", "mes": "x"}], detached=True)
    with pytest.raises(NotFound):  # the chat exists, the owner does not own it
        await store.append_messages(
            chat_id, [{"name": "U", "mes": "x"}], owner="someone-else", detached=True
        )
    await store.append_message(chat_id, {"name": "U", "is_user": True, "mes": "fine"})
    assert [m.data["mes"] for m in (await store.load_chat(chat_id)).messages] == ["old", "fine"]
