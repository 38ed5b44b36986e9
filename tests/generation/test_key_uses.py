"""The key pool's use counter is persisted (migration 002), so least-used-first holds across
pools and processes that share one store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tavernkit.generation.keys import KeyPool, PoolKey, StoreCooldownStore
from tavernkit.store import open_store
from tavernkit.store.key_types import KeyState


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_uses_column_round_trips_and_defaults_to_zero(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "t.db")
    try:
        key_id = await store.add_api_key("openai", "sk-a", owner="alice")
        assert (await store.get_key_state(key_id, owner="alice")).uses == 0
        await store.put_key_state(KeyState(key_id, uses=7, failures=1), owner="alice")
        state = await store.get_key_state(key_id, owner="alice")
        assert (state.uses, state.failures) == (7, 1)
    finally:
        await store.close()
    with sqlite3.connect(tmp_path / "t.db") as db:
        names = [row[0] for row in db.execute("SELECT name FROM _migrations ORDER BY name")]
        columns = [row[1] for row in db.execute("PRAGMA table_info(key_state)")]
    assert names[:2] == ["001_initial", "002_key_uses"]  # later migrations may follow
    assert "uses" in columns


async def test_least_used_key_wins_across_fresh_pools(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "t.db")
    try:
        ids = [await store.add_api_key("openai", f"sk-{i}", owner="alice") for i in range(3)]

        async def load(key: PoolKey) -> str:
            return await store.get_api_key_secret(key.key_id, owner="alice")

        clock = Clock()
        picked = []
        for _ in range(6):
            # a new pool each time: what a CLI process that starts per message sees
            pool = KeyPool(
                "alice",
                "openai",
                [PoolKey(i) for i in ids],
                load_secret=load,
                store=StoreCooldownStore(store),
                clock=clock,
            )
            key = await pool.select()
            assert key is not None
            picked.append(key.key_id)
            await pool.record_success(key)
        # every key used twice, in order: least used first, ties by least recently used
        assert picked == ids + ids
        assert [(await store.get_key_state(i, owner="alice")).uses for i in ids] == [2, 2, 2]
        # a key used less than the others is picked even when it was used more recently
        await store.put_key_state(KeyState(ids[2], uses=1, last_used=None), owner="alice")
        clock.now += 10
        pool = KeyPool(
            "alice",
            "openai",
            [PoolKey(i) for i in ids],
            load_secret=load,
            store=StoreCooldownStore(store),
            clock=clock,
        )
        assert (await pool.select()).key_id == ids[2]  # type: ignore[union-attr]
    finally:
        await store.close()
