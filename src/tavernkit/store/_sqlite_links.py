"""A record's blobs (an avatar, a card's picture) and its ordered links to other records, in
SQLite: the parts of :class:`~tavernkit.store.sqlite.SqliteStore` that hang off a record by its
id (``record_blobs``, ``record_links``; deleting the record deletes them)."""

from __future__ import annotations

from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.store._sqlite_base import SqliteBase
from tavernkit.store.record_types import RecordInfo
from tavernkit.store.sqlite_thread import SqliteConnection

__all__ = ["SqliteBlobsAndLinks"]


class SqliteBlobsAndLinks(SqliteBase):
    @staticmethod
    async def _put_blob(db: SqliteConnection, rid: str, blob: str, content: bytes) -> None:
        await db.execute(
            "INSERT INTO record_blobs (record_id, name, data) VALUES (?, ?, ?) "
            "ON CONFLICT (record_id, name) DO UPDATE SET data = excluded.data",
            (rid, blob, bytes(content)),
        )

    async def get_blob(
        self, kind: str, ref: str, blob: str = "avatar", *, owner: str = DEFAULT_OWNER
    ) -> bytes | None:
        async with self._read() as db:
            info, _ = await self._resolve(db, kind, ref, owner)
            async with db.execute(
                "SELECT data FROM record_blobs WHERE record_id = ? AND name = ?", (info.id, blob)
            ) as cur:
                row = await cur.fetchone()
        return None if row is None else bytes(row[0])

    async def set_blob(
        self, kind: str, ref: str, blob: str, data: bytes | None, *, owner: str = DEFAULT_OWNER
    ) -> None:
        async with self._write() as db:
            info, _ = await self._resolve(db, kind, ref, owner)
            if data is None:
                await db.execute(
                    "DELETE FROM record_blobs WHERE record_id = ? AND name = ?", (info.id, blob)
                )
            else:
                await self._put_blob(db, info.id, blob, data)

    async def list_blobs(self, kind: str, ref: str, *, owner: str = DEFAULT_OWNER) -> list[str]:
        async with self._read() as db:
            info, _ = await self._resolve(db, kind, ref, owner)
            async with db.execute(
                "SELECT name FROM record_blobs WHERE record_id = ? ORDER BY rowid", (info.id,)
            ) as cur:
                return [str(row[0]) for row in await cur.fetchall()]

    async def link(
        self,
        kind: str,
        ref: str,
        rel: str,
        target_kind: str,
        target_ref: str,
        *,
        owner: str = DEFAULT_OWNER,
    ) -> None:
        async with self._write() as db:
            src, _ = await self._resolve(db, kind, ref, owner)
            dst, _ = await self._resolve(db, target_kind, target_ref, owner)
            await db.execute(
                "INSERT INTO record_links (from_id, rel, to_id, position) SELECT ?, ?, ?, "
                "COALESCE(MAX(position) + 1, 0) FROM record_links WHERE from_id = ? AND rel = ? "
                "ON CONFLICT DO NOTHING",
                (src.id, rel, dst.id, src.id, rel),
            )

    async def unlink(
        self,
        kind: str,
        ref: str,
        rel: str,
        target_kind: str,
        target_ref: str,
        *,
        owner: str = DEFAULT_OWNER,
    ) -> None:
        async with self._write() as db:
            src, _ = await self._resolve(db, kind, ref, owner)
            dst, _ = await self._resolve(db, target_kind, target_ref, owner)
            await db.execute(
                "DELETE FROM record_links WHERE from_id = ? AND rel = ? AND to_id = ?",
                (src.id, rel, dst.id),
            )

    async def links(
        self, kind: str, ref: str, rel: str, *, owner: str = DEFAULT_OWNER
    ) -> list[RecordInfo]:
        self._check_kind(kind)
        # each statement alone: a record deleted between them has no links, as it would
        # have a moment later
        async with self._read_now(snapshot=False) as db:
            # a ref that is the record's id (the turn loader's): one query, the source's row
            # even when it has no links; a name, or no such id, resolves first
            rows = list(
                await db.execute_fetchall(
                    "SELECT r.kind, r.id, r.name, r.owner, r.created, r.updated FROM records s "
                    "LEFT JOIN record_links l ON l.from_id = s.id AND l.rel = ? "
                    "LEFT JOIN records r ON r.id = l.to_id "
                    "WHERE s.owner = ? AND s.kind = ? AND s.id = ? ORDER BY l.position",
                    (rel, owner, kind, ref),
                )
            )
            if not rows:
                (src_id,) = await self._record_row(db, kind, ref, owner, "id")
                rows = list(
                    await db.execute_fetchall(
                        "SELECT r.kind, r.id, r.name, r.owner, r.created, r.updated "
                        "FROM record_links l JOIN records r ON r.id = l.to_id "
                        "WHERE l.from_id = ? AND l.rel = ? ORDER BY l.position",
                        (src_id, rel),
                    )
                )
        return [self._info(r) for r in rows if r[1] is not None]
