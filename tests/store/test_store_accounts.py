"""The store's accounts (migration 005): users unique by name whatever the case, tokens and
sessions found by hash only, gone with their user; sessions expire and slide."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tavernkit.errors import Conflict, NotFound
from tavernkit.store.accounts import AccountStore
from tavernkit.store.sqlite import open_store


async def test_users_tokens_sessions(tmp_path: Path) -> None:
    async with await open_store(tmp_path / "t.db") as store:
        assert isinstance(store, AccountStore)
        ann = await store.create_user("Ann", "$argon2id$x", owner="user:a")
        with pytest.raises(Conflict):
            await store.create_user(" ann ", "$argon2id$y", owner="user:b")
        with pytest.raises(Conflict):
            await store.create_user("bob", "$argon2id$y", owner="user:a")
        found, hashed = await store.find_user("ANN")
        assert found == ann and hashed == "$argon2id$x"
        with pytest.raises(NotFound):
            await store.find_user("nobody")
        token = await store.add_token(ann.id, "h1", label="bot")
        assert await store.user_for_token("h1") == ann
        assert await store.user_for_token("h2") is None
        assert (await store.list_tokens(ann.id))[0].last_used is not None
        with pytest.raises(NotFound):
            await store.delete_token("someone-else", token.id)
        now = datetime.now(UTC)
        await store.create_session(ann.id, "s1", expires=now + timedelta(hours=1))
        got = await store.user_for_session("s1", now=now, extend_to=now + timedelta(hours=2))
        assert got is not None and got[1] == ann
        assert got[0].expires == now + timedelta(hours=2)  # slid forward
        again = await store.user_for_session(
            "s1", now=now, extend_to=now + timedelta(hours=2, seconds=30)
        )
        assert again is not None and again[0].expires == now + timedelta(hours=2)  # < a minute
        late = now + timedelta(hours=3)
        assert await store.user_for_session("s1", now=late, extend_to=late) is None
        assert await store.user_for_session("s1", now=now, extend_to=now) is None  # deleted
        await store.create_session(ann.id, "s2", expires=now + timedelta(hours=1))
        await store.delete_user(ann.id)
        assert await store.user_for_token("h1") is None
        assert await store.user_for_session("s2", now=now, extend_to=now) is None
        assert await store.count_users() == 0
