"""``Tavern.for_owner``: per-user views over one store; the in-memory rate limiter; the turn
admission the turn routes call."""

from __future__ import annotations

from pathlib import Path

import pytest

from tavernkit.errors import TavernKitError, TooManyAttempts
from tavernkit.facade import Tavern
from tavernkit.server.coordination_memory import InMemoryRateLimiter
from tavernkit.server.principal import Principal
from tavernkit.server.settings import RateLimit

from ._cards import card
from ._live import live_server
from .conftest import settings


async def test_views_share_the_store_not_the_owner(tmp_path: Path) -> None:
    async with Tavern(tmp_path, load_plugins=False) as tk:
        ann = tk.for_owner("ann")
        assert tk.for_owner("ann") is ann  # cached
        assert tk.for_owner(tk.owner) is tk
        assert ann.store is tk.store and ann.owner == "ann"
        assert ann.runtime.local_models is tk.runtime.local_models
        assert ann.runtime.key_cooldowns is tk.runtime.key_cooldowns
        assert ann.chats is not tk.chats and ann.tools is not tk.tools
        await ann.store.put("character", card("Mira"), owner="ann")
        assert [i.name for i in await ann.store.list("character", owner=ann.owner)] == ["Mira"]
        assert await tk.store.list("character", owner=tk.owner) == []
        assert ann.library.owner == "ann"
        with pytest.raises(TavernKitError, match="made the view"):
            ann.for_owner("bob")
    # closing the Tavern detaches its views (the store is closed once, by its opener)
    assert not ann.runtime.is_open
    with pytest.raises(TavernKitError, match="closed with the Tavern"):
        await ann.open()
    with pytest.raises(TavernKitError, match="not open"):
        tk.for_owner("bob")


async def test_closing_a_view_leaves_the_store_open(tmp_path: Path) -> None:
    async with Tavern(tmp_path, load_plugins=False) as tk:
        await tk.for_owner("ann").close()
        assert await tk.store.list("character", owner=tk.owner) == []


async def test_rate_limiter_window() -> None:
    now = [100.0]
    limiter = InMemoryRateLimiter(clock=lambda: now[0])
    for _ in range(3):
        assert (await limiter.hit("k", limit=3, window_s=10)).allowed
    refused = await limiter.hit("k", limit=3, window_s=10)
    assert not refused.allowed and refused.retry_after_s == pytest.approx(10.0)
    assert (await limiter.hit("other", limit=3, window_s=10)).allowed
    now[0] += 4
    assert (await limiter.hit("k", limit=3, window_s=10)).retry_after_s == pytest.approx(6.0)
    now[0] += 6.01
    assert (await limiter.hit("k", limit=3, window_s=10)).allowed


async def test_turn_admission_is_per_user(tmp_path: Path) -> None:
    conf = settings(tmp_path / "home", turn_rate=RateLimit(2, 60.0))
    async with live_server(conf) as server:
        ann = Principal(user_id="ann", owner="ann", is_admin=False, via="token")
        bob = Principal(user_id="bob", owner="bob", is_admin=False, via="token")
        await server.state.admit_turn(ann)
        await server.state.admit_turn(ann)
        with pytest.raises(TooManyAttempts) as caught:
            await server.state.admit_turn(ann)
        assert caught.value.retry_after_s > 0
        await server.state.admit_turn(bob)
