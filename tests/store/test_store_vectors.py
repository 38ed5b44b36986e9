"""Memory's vector rows (migration 007) on both backends: float32 blobs (BYTEA on
PostgreSQL; pgvector is not packaged for this Debian) read back into one numpy matrix, so a
second process finds the vectors the first embedded and embeds nothing again."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from tavernkit.memory.collections import VectorCollections, VectorRows
from tavernkit.store import Store, open_postgres_store
from tavernkit.store.migrations import MIGRATIONS
from tavernkit.store.pg_migrations import PG_MIGRATIONS

HEADER = {"user_name": "You", "character_name": "Ava", "chat_metadata": {}}


class Counting:
    """An embedder that says what it was asked to embed (a vector from each text's shape)."""

    name = "counting"

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def embed_many(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.texts.extend(texts)
        return np.array([[len(t), t.count("a") + 0.5, 1 / 3] for t in texts], dtype=np.float32)


def test_every_sqlite_migration_has_its_postgresql_mirror() -> None:
    assert [name for name, _ in PG_MIGRATIONS] == [name for name, _ in MIGRATIONS]


async def test_vectors_round_trip_exactly_and_go_with_their_chat(store: Store) -> None:
    assert isinstance(store, VectorRows)
    matrix = np.array([[0.1, -2.5, 3e-8], [1 / 3, 7.0, -0.0]], dtype=np.float32)
    items = [(11, "alpha é", 0), (-(2**62), "beta", 1)]
    await store.add_vectors("lore:x", "space", items, matrix, owner="u1")
    loaded, vectors = await store.load_vectors("lore:x", "space", owner="u1")
    assert loaded == items
    assert vectors is not None and vectors.dtype == np.float32
    assert vectors.tobytes() == matrix.tobytes()
    assert (await store.load_vectors("lore:x", "space", owner="u2")) == ([], None)
    await store.delete_vectors("lore:x", "space", [11], owner="u1")
    assert [i[0] for i in (await store.load_vectors("lore:x", "space", owner="u1"))[0]] == [
        -(2**62)
    ]
    chat = await store.create_chat(HEADER, [], name="c", owner="u1")
    await store.add_vectors(f"chat:{chat.id}", "space", items[:1], matrix[:1], owner="u1")
    await store.delete_chat(chat.id, owner="u1")
    assert (await store.load_vectors(f"chat:{chat.id}", "space", owner="u1")) == ([], None)


async def test_a_second_process_reads_the_vectors_and_embeds_nothing(
    postgres_url: str, tmp_path: Path
) -> None:
    items = [(1, "alpha", 0), (2, "banana", 1), (3, "cabana", 2)]
    a = await open_postgres_store(postgres_url, key_dir=tmp_path / "keys")
    b = await open_postgres_store(postgres_url, key_dir=tmp_path / "keys")
    try:
        first = Counting()
        await VectorCollections(first, rows=a, owner="u1").sync("chat:x", items)
        assert first.texts == ["alpha", "banana", "cabana"]
        second = Counting()
        collections = VectorCollections(second, rows=b, owner="u1")
        assert await collections.sync("chat:x", items) == (0, 0)
        hits = await collections.query("chat:x", "banana", 1)
        assert [h.hash for h in hits] == [2]
        assert second.texts == ["banana"]  # the query only
    finally:
        await a.close()
        await b.close()
