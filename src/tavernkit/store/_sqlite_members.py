"""One member of a record's JSON read, set or removed without the record going through Python
whole: a 20,000-entry lorebook is a 28 MB row, and an editor that changes one entry must not
parse, validate and re-encode all of it (a second of the event loop, the GIL held throughout).

On SQLite the work is SQLite's own JSON functions (``json_extract``, ``json_each``,
``json_set``, ``json_remove``) on the writer connection's thread: C code that releases the
GIL, so the loop keeps serving while a big row is rewritten. They keep every other key, its
value's text and its order (a new member goes last, as a JavaScript object's new key
does). PostgreSQL keeps
records as ``TEXT`` (``jsonb`` would reorder keys, and ``json`` has no setter): there a
member is read by PostgreSQL's ``json`` operators (the text kept as it is), and written, as
on SQLite for a member name a JSON path cannot quote, by parsing and encoding the row in a
worker thread inside the write, the row locked (that thread holds the GIL while it works).

Every read here goes over the writer connection's thread, not the read connection the store's
small reads use on the caller's thread: scanning a 28 MB row there would hold the event loop.

A member path is a tuple of object keys (``("entries", "12")``); every member named along it
but the last must be an object. The record is not validated whole: the caller checks what it
writes (the lorebook admin validates the entry).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

from tavernkit.errors import NotFound
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.store._message_rows import dumps
from tavernkit.store._sqlite_base import SqliteBase
from tavernkit.store.protocol import RecordInfo

__all__ = ["SqliteRecordMembers"]

MemberPath = Sequence[str]


def _json_path(path: MemberPath) -> str | None:
    """SQLite's JSON path of ``path`` (``$."entries"."12"``); ``None`` when a name holds a
    character a quoted label cannot (SQLite's paths have no escapes)."""
    if not path or any('"' in p or "\\" in p for p in path):
        return None
    return "$" + "".join(f'."{p}"' for p in path)


def _parent(doc: Any, path: MemberPath, *, create: bool) -> dict[str, Any] | None:
    """The object holding ``path``'s last member in the parsed record ``doc``."""
    node = doc
    for name in path[:-1]:
        if not isinstance(node, dict):
            return None
        if create and name not in node:
            node[name] = {}
        node = node.get(name)
    return node if isinstance(node, dict) else None


def _missing(path: MemberPath) -> NotFound:
    return NotFound(f"no {'.'.join(path)} in this record")


class SqliteRecordMembers(SqliteBase):
    """``get_record_text`` and the record-member calls of the
    :class:`~tavernkit.store.protocol.Store` (see the module doc)."""

    #: whether the database's JSON functions keep a document's text and key order (SQLite's
    #: do; a subclass whose database has none sets this False)
    _json_in_sql = True

    async def get_record_text(
        self, kind: str, ref: str, *, owner: str = DEFAULT_OWNER
    ) -> tuple[RecordInfo, str]:
        async with self._read() as db:
            return await self._resolve(db, kind, ref, owner)

    async def get_record_member(
        self, kind: str, ref: str, path: MemberPath, *, owner: str = DEFAULT_OWNER
    ) -> Any:
        where = _json_path(path) if self._json_in_sql else None
        if where is None:
            return await self._in_python(kind, ref, owner, path, lambda parent: parent[path[-1]])
        async with self._read() as db:
            rid = (await self._record_row(db, kind, ref, owner, "id"))[0]
            rows = list(
                await db.execute_fetchall(
                    "SELECT json_type(data, ?), json_extract(data, ?) FROM records WHERE id = ?",
                    (where, where, rid),
                )
            )
        if not rows or rows[0][0] is None:
            raise _missing(path)
        kind_of, value = rows[0]
        if kind_of in ("object", "array"):
            return json.loads(str(value))
        return {"true": True, "false": False, "null": None}.get(kind_of, value)

    async def record_member_keys(
        self, kind: str, ref: str, path: MemberPath, *, owner: str = DEFAULT_OWNER
    ) -> list[str]:
        where = _json_path(path) if self._json_in_sql else None
        if where is None:

            def keys(parent: dict[str, Any]) -> list[str]:
                node = parent.get(path[-1])
                return list(node) if isinstance(node, dict) else []

            found: list[str] = await self._in_python(kind, ref, owner, path, keys, missing_ok=True)
            return found
        async with self._read() as db:
            rid = (await self._record_row(db, kind, ref, owner, "id"))[0]
            rows = await db.execute_fetchall(
                "SELECT j.key FROM records r, json_each(r.data, ?) j "
                "WHERE r.id = ? AND json_type(r.data, ?) = 'object'",
                (where, rid, where),
            )
        return [str(row[0]) for row in rows]

    async def put_record_member(
        self, kind: str, ref: str, path: MemberPath, value: Any, *, owner: str = DEFAULT_OWNER
    ) -> None:
        where = _json_path(path) if self._json_in_sql else None
        if where is None:

            def put(parent: dict[str, Any]) -> None:
                parent[path[-1]] = value

            await self._in_python(kind, ref, owner, path, put, write=True, missing_ok=True)
            return
        # each object along the path made when missing (json_insert leaves one that is there)
        steps: list[Any] = []
        for depth in range(1, len(path)):
            steps += [_json_path(path[:depth]), "{}"]
        inner = "data"
        for _ in range(len(path) - 1):
            inner = f"json_insert({inner}, ?, json(?))"
        async with self._write() as db:
            rid = (await self._record_row(db, kind, ref, owner, "id"))[0]
            await db.execute(
                f"UPDATE records SET data = json_set({inner}, ?, json(?)), updated = ?, "
                "revision = revision + 1 WHERE id = ?",
                (*steps, where, dumps(value), self._now(), rid),
            )

    async def delete_record_member(
        self, kind: str, ref: str, path: MemberPath, *, owner: str = DEFAULT_OWNER
    ) -> None:
        where = _json_path(path) if self._json_in_sql else None
        if where is None:

            def remove(parent: dict[str, Any]) -> None:
                del parent[path[-1]]

            await self._in_python(kind, ref, owner, path, remove, write=True)
            return
        async with self._write() as db:
            rid = (await self._record_row(db, kind, ref, owner, "id"))[0]
            found = list(
                await db.execute_fetchall(
                    "UPDATE records SET data = json_remove(data, ?), updated = ?, "
                    "revision = revision + 1 WHERE id = ? AND json_type(data, ?) IS NOT NULL "
                    "RETURNING id",
                    (where, self._now(), rid, where),
                )
            )
        if not found:
            raise _missing(path)

    async def _in_python(
        self,
        kind: str,
        ref: str,
        owner: str,
        path: MemberPath,
        fn: Callable[[dict[str, Any]], Any],
        *,
        write: bool = False,
        missing_ok: bool = False,
    ) -> Any:
        """``fn`` on the object holding ``path``'s last member, the record parsed (and, with
        ``write``, encoded again and stored) in a worker thread."""

        def run(text: str) -> tuple[Any, str | None]:
            doc = json.loads(text)
            parent = _parent(doc, path, create=write and missing_ok)
            if parent is None and missing_ok and not write:
                parent = {}
            if parent is None or (not missing_ok and path[-1] not in parent):
                raise _missing(path)
            result = fn(parent)
            return result, dumps(doc) if write else None

        if not write:
            async with self._read() as db:
                _, text = await self._resolve(db, kind, ref, owner)
            return (await asyncio.to_thread(run, text))[0]
        async with self._write() as db:
            rid = (await self._record_row(db, kind, ref, owner, "id"))[0]
            # a plain SELECT of the row: PostgreSQL's connection locks it (FOR UPDATE) until
            # the write commits, so writers in other processes wait instead of overwriting
            rows = list(await db.execute_fetchall("SELECT data FROM records WHERE id = ?", (rid,)))
            if not rows:
                raise NotFound(f"no {kind} {ref!r}")
            result, new = await asyncio.to_thread(run, str(rows[0][0]))
            await db.execute(
                "UPDATE records SET data = ?, updated = ?, revision = revision + 1 WHERE id = ?",
                (new, self._now(), rid),
            )
        return result
