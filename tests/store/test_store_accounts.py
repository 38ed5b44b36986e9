"""The store's accounts (migration 005): users unique by name whatever the case, tokens and
sessions found by hash only, gone with their user; sessions expire and slide."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tavernkit.errors import Conflict, NotFound
from tavernkit.store import Store
from tavernkit.store.accounts import AccountStore


async def test_users_tokens_sessions(store: Store) -> None:
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


async def test_a_password_change_signs_out_all_but_the_callers_session_or_token(
    store: Store,
) -> None:
    ann = await store.create_user("Ann", "$argon2id$old", owner="user:a")
    bob = await store.create_user("Bob", "$argon2id$bob", owner="user:b")
    now = datetime.now(UTC)
    later = now + timedelta(hours=1)
    mine = await store.create_session(ann.id, "s-mine", expires=later)
    await store.create_session(ann.id, "s-other", expires=later)
    await store.create_session(bob.id, "s-bob", expires=later)
    for hashed in ("t1", "t2"):
        await store.add_token(ann.id, hashed, label=hashed)
    await store.add_token(bob.id, "t-bob", label="bob")

    await store.change_password(ann.id, "$argon2id$new", keep_session_id=mine.id)
    assert (await store.find_user("ann"))[1] == "$argon2id$new"
    assert await store.user_for_session("s-mine", now=now, extend_to=now) is not None
    assert await store.user_for_session("s-other", now=now, extend_to=now) is None
    assert await store.list_tokens(ann.id) == []
    # another user's are untouched
    assert await store.user_for_session("s-bob", now=now, extend_to=now) is not None
    assert await store.user_for_token("t-bob") == bob

    # a token caller keeps its own token; an admin's reset keeps nothing
    await store.add_token(ann.id, "t3", label="t3")
    await store.add_token(ann.id, "t4", label="t4")
    await store.change_password(ann.id, "$argon2id$3", keep_token_hash="t3")
    assert [t.label for t in await store.list_tokens(ann.id)] == ["t3"]
    assert await store.user_for_session("s-mine", now=now, extend_to=now) is None
    await store.change_password(ann.id, "$argon2id$4")
    assert await store.list_tokens(ann.id) == []
    with pytest.raises(NotFound):
        await store.change_password("nobody", "$argon2id$x")


async def test_a_session_ends_at_its_absolute_lifetime_however_busy(store: Store) -> None:
    """``started_after``: a session created at or before it is over (and deleted) even while
    its idle expiry keeps sliding."""
    ann = await store.create_user("Ann", "$argon2id$x", owner="user:a")
    now = datetime.now(UTC)
    session = await store.create_session(ann.id, "s1", expires=now + timedelta(days=1))
    later = now + timedelta(hours=1)
    kept = await store.user_for_session(
        "s1",
        now=later,
        extend_to=later + timedelta(days=1),
        started_after=session.created - timedelta(seconds=1),
    )
    assert kept is not None and kept[0].expires == later + timedelta(days=1)
    over = await store.user_for_session(
        "s1", now=later, extend_to=later + timedelta(days=1), started_after=session.created
    )
    assert over is None
    # deleted: not even a looser limit brings it back
    assert await store.user_for_session("s1", now=now, extend_to=now) is None
