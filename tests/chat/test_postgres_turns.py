"""Chat turns on the PostgreSQL store (a real cluster, tests/_services.py), end to end: the
Tavern opened on a ``postgresql://`` URL, a turn against the scripted server, and a second
Tavern (another process) on the same database seeing what the first wrote."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tavernkit.chat import ChatService
from tavernkit.errors import StoreError
from tavernkit.facade import Tavern
from tavernkit.models.chat import Message
from tavernkit.store import PostgresStore

from ._server import HangingServer, Reply
from .conftest import StepClock, World, make_world


@pytest.fixture
async def pg_world(postgres_url: str, tmp_path: Path) -> AsyncIterator[World]:
    async with HangingServer() as server:
        tk = await make_world(tmp_path / "home", server, database=postgres_url)
        try:
            chats = ChatService(tk.runtime, clock=StepClock(), stream_interval=0)
            yield World(tk, chats, server)
        finally:
            await tk.close()


async def test_a_turn_on_postgresql_is_seen_by_another_process(
    pg_world: World, postgres_url: str, tmp_path: Path
) -> None:
    assert isinstance(pg_world.tk.store, PostgresStore)
    pg_world.server.script(Reply(text="The tide turns at nine."), Reply(text="At nine, sharp."))
    info = await pg_world.chats.new_chat("Mira")
    out = await pg_world.chats.send(info.id, "When does {{char}} sail?")
    assert out.status == "completed" and out.text == "The tide turns at nine."
    swiped = await pg_world.chats.swipe(info.id)
    assert (swiped.text, swiped.swipe_index) == ("At nine, sharp.", 1)
    key_id = await pg_world.tk.store.add_api_key("openai", "sk-shared-by-both", label="w")
    async with Tavern(tmp_path / "other-home", load_plugins=False, database=postgres_url) as b:
        stored = await b.store.load_chat(info.id)
        messages = [Message.model_validate(m.data) for m in stored.messages]
        assert [m.mes for m in messages] == [
            "Welcome aboard, Ada.",
            "When does Mira sail?",
            "At nine, sharp.",
        ]
        assert messages[-1].swipes == ["The tide turns at nine.", "At nine, sharp."]
        assert all(m.partial_swipes == () for m in stored.messages)
        assert [c.name for c in await b.store.list("character")] == ["Mira"]
        # the key's secret lives in this machine's key folder, which both processes share
        assert await b.store.get_api_key_secret(key_id) == "sk-shared-by-both"


async def test_a_database_that_is_not_a_url_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="not a database URL"):
        await Tavern(tmp_path, database="mysql://x@y/z").open()
