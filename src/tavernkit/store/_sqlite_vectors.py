"""Memory's vector rows in SQLite (migration 007): ``memory.collections.VectorRows``.

Vectors are little-endian float32 blobs, read back into one numpy matrix per collection (the
collection object keeps it in memory afterwards, so a turn reads no rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.store._sqlite_base import SqliteBase

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["SqliteVectors"]

#: hashes per ``DELETE ... IN (...)`` (SQLite's bound-parameter limit is far above)
_DELETE_BATCH = 500


class SqliteVectors(SqliteBase):
    async def load_vectors(
        self, collection: str, space: str, *, owner: str = DEFAULT_OWNER
    ) -> tuple[list[tuple[int, str, int]], NDArray[np.float32] | None]:
        """Every item of one collection in insertion order, and their vectors (None: none)."""
        import numpy as np  # optional (the 'embed' extra): the core installs and runs without it

        async with self._read() as db:
            rows = await db.execute_fetchall(
                "SELECT hash, text, label, vector FROM memory_vectors "
                "WHERE owner = ? AND collection = ? AND space = ? ORDER BY seq",
                (owner, collection, space),
            )
        if not rows:
            return [], None
        items = [(int(r[0]), str(r[1]), int(r[2])) for r in rows]
        matrix = np.frombuffer(b"".join(bytes(r[3]) for r in rows), dtype="<f4")
        return items, matrix.reshape(len(items), -1).astype(np.float32)

    async def add_vectors(
        self,
        collection: str,
        space: str,
        items: Sequence[tuple[int, str, int]],
        vectors: NDArray[np.float32],
        *,
        owner: str = DEFAULT_OWNER,
    ) -> None:
        import numpy as np  # optional (the 'embed' extra): the core installs and runs without it

        rows = np.asarray(vectors, dtype="<f4")
        async with self._write() as db:
            await db.executemany(
                "INSERT INTO memory_vectors (owner, collection, space, hash, label, text, vector) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (owner, collection, space, h, label, text, rows[i].tobytes())
                    for i, (h, text, label) in enumerate(items)
                ],
            )

    async def delete_vectors(
        self,
        collection: str,
        space: str,
        hashes: Sequence[int],
        *,
        owner: str = DEFAULT_OWNER,
    ) -> None:
        async with self._write() as db:
            for start in range(0, len(hashes), _DELETE_BATCH):
                part = list(hashes[start : start + _DELETE_BATCH])
                marks = ",".join("?" * len(part))
                await db.execute(
                    "DELETE FROM memory_vectors WHERE owner = ? AND collection = ? "
                    f"AND space = ? AND hash IN ({marks})",
                    (owner, collection, space, *part),
                )

    async def purge_vectors(self, collection: str, *, owner: str = DEFAULT_OWNER) -> None:
        """Delete a collection in every vector space (SillyTavern's ``purge``)."""
        async with self._write() as db:
            await db.execute(
                "DELETE FROM memory_vectors WHERE owner = ? AND collection = ?",
                (owner, collection),
            )
