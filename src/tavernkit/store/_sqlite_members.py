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

A lorebook's entries are rows of their own (:mod:`tavernkit.store._lorebook_rows`): a member
under its ``entries`` is read and written in its entry's row, on either database, and the
book's record row only has its revision bumped.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

from tavernkit.errors import NotFound
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.store._lorebook_rows import BOOK_KIND, entry_lines_text, is_entry_path
from tavernkit.store._message_rows import dumps
from tavernkit.store._sqlite_base import SqliteBase
from tavernkit.store.record_types import ENTRY_LINE_FIELDS, RecordInfo
from tavernkit.store.sqlite_thread import SqliteConnection

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


#: a book's entry lines in SQL (:func:`~tavernkit.store._lorebook_rows.entry_lines_text`'s
#: JSON): one ``json_extract`` of the fields parses each row once, in SQLite's C, off the loop
_LINE_PATHS = ", ".join(f"'$.{name}'" for name in ENTRY_LINE_FIELDS)
_LINES_SQL = (
    "SELECT '[' || coalesce(group_concat(line, ','), '') || ']' FROM (SELECT "
    f"json_insert(json_extract(data, {_LINE_PATHS}), '$[#]', uid) AS line "
    "FROM lorebook_entries WHERE record_id = ?{where} ORDER BY seq)"
)
#: SQLite's ``lower`` folds only ASCII: a query with other letters is matched in Python
_CONTENT_HAS = " AND instr(lower(json_extract(data, '$.content')), ?) > 0"
#: the same, the rows first narrowed by ``LIKE`` on their JSON text (ASCII, any case), which
#: parses nothing: a text that JSON writes as it is (no quote, backslash or control character)
#: is in the content's text only where it is in the row's (4x faster on a 20,000-entry book)
_CONTENT_LIKE = " AND data LIKE ? ESCAPE '\\'" + _CONTENT_HAS


def _content_filter(text: str) -> tuple[str, tuple[str, ...]]:
    """The SQL that keeps the entry rows whose content holds ``text`` (ASCII), and its
    parameters."""
    if any(c in text for c in '"\\') or any(ord(c) < 0x20 for c in text):
        return _CONTENT_HAS, (text.lower(),)
    pattern = text.replace("%", "\\%").replace("_", "\\_")
    return _CONTENT_LIKE, (f"%{pattern}%", text.lower())


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
            info, text = await self._resolve(db, kind, ref, owner)
            return info, await self._whole(db, kind, info.id, text)

    async def get_record_member(
        self, kind: str, ref: str, path: MemberPath, *, owner: str = DEFAULT_OWNER
    ) -> Any:
        if is_entry_path(kind, path):
            return await self._entry_member(kind, ref, path, owner)
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
        if is_entry_path(kind, path):
            return await self._entry_keys(kind, ref, path, owner)
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
        if is_entry_path(kind, path):
            await self._change_entry(kind, ref, path, owner, value=value)
            return
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
        if is_entry_path(kind, path):
            await self._change_entry(kind, ref, path, owner, delete=True)
            return
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

    # -- a lorebook's entry rows ----------------------------------------------------------

    async def lorebook_entry_lines(
        self, ref: str, *, content_has: str | None = None, owner: str = DEFAULT_OWNER
    ) -> tuple[RecordInfo, str]:
        """The book's listing line and its entries' lines as JSON text (each
        ``[comment, key, ..., uid]``: :data:`~tavernkit.store.record_types.ENTRY_LINE_FIELDS`
        then the uid), in the book's order, without their content; with ``content_has``, only
        the entries whose content holds it (in any case)."""
        in_sql = self._json_in_sql and (content_has is None or content_has.isascii())
        async with self._read() as db:
            info, _ = await self._resolve(db, BOOK_KIND, ref, owner)
            if in_sql:
                where, extra = ("", ()) if content_has is None else _content_filter(content_has)
                sql = _LINES_SQL.format(where=where)
                found = list(await db.execute_fetchall(sql, (info.id, *extra)))
                return info, str(found[0][0])
            rows = await db.execute_fetchall(
                "SELECT uid, data FROM lorebook_entries WHERE record_id = ? ORDER BY seq",
                (info.id,),
            )
        pairs = [(str(uid), str(data)) for uid, data in rows]
        return info, await asyncio.to_thread(entry_lines_text, pairs, content_has)

    async def _entry_member(self, kind: str, ref: str, path: MemberPath, owner: str) -> Any:
        """The member ``path`` (``entries``, an entry, or a member inside one)."""
        async with self._read() as db:
            rid = (await self._record_row(db, kind, ref, owner, "id"))[0]
            if len(path) == 1:
                rows = await db.execute_fetchall(
                    "SELECT uid, data FROM lorebook_entries WHERE record_id = ? ORDER BY seq",
                    (rid,),
                )
                return {str(uid): json.loads(str(data)) for uid, data in rows}
            entry = await _entry_row(db, str(rid), path[1])
        if entry is None:
            raise _missing(path)
        node: Any = entry
        for name in path[2:]:
            if not isinstance(node, dict) or name not in node:
                raise _missing(path)
            node = node[name]
        return node

    async def _entry_keys(self, kind: str, ref: str, path: MemberPath, owner: str) -> list[str]:
        if len(path) == 1:
            async with self._read() as db:
                rid = (await self._record_row(db, kind, ref, owner, "id"))[0]
                rows = await db.execute_fetchall(
                    "SELECT uid FROM lorebook_entries WHERE record_id = ? ORDER BY seq", (rid,)
                )
            return [str(row[0]) for row in rows]
        try:
            node = await self._entry_member(kind, ref, path, owner)
        except NotFound:
            return []
        return list(node) if isinstance(node, dict) else []

    async def _change_entry(
        self,
        kind: str,
        ref: str,
        path: MemberPath,
        owner: str,
        *,
        value: Any = None,
        delete: bool = False,
    ) -> None:
        """Set (or ``delete``) the member ``path`` of a book's entries: one entry's row is
        written (a new one goes last) and the book's revision bumped; its other rows and its
        record's JSON stay as they are. The whole ``entries`` (a path of one) is all rows."""
        async with self._write() as db:
            rid = str((await self._record_row(db, kind, ref, owner, "id"))[0])
            if len(path) == 1:
                await self._replace_entries(db, rid, path, value, delete=delete)
            elif len(path) == 2 and delete:
                gone = await db.execute_fetchall(
                    "DELETE FROM lorebook_entries WHERE record_id = ? AND uid = ? RETURNING uid",
                    (rid, path[1]),
                )
                if not list(gone):
                    raise _missing(path)
            else:
                entry = value
                if len(path) > 2:  # a member inside the entry: the entry's row read first
                    entry = await _entry_row(db, rid, path[1])
                    if entry is None and delete:
                        raise _missing(path)
                    entry = {} if entry is None else entry
                    parent = _parent(entry, path[2:], create=not delete)
                    if parent is None or (delete and path[-1] not in parent):
                        raise _missing(path)
                    if delete:
                        del parent[path[-1]]
                    else:
                        parent[path[-1]] = value
                await _put_entry_row(db, rid, path[1], entry)
            await db.execute(
                "UPDATE records SET updated = ?, revision = revision + 1 WHERE id = ?",
                (self._now(), rid),
            )

    @staticmethod
    async def _replace_entries(
        db: SqliteConnection, rid: str, path: MemberPath, value: Any, *, delete: bool
    ) -> None:
        gone = await db.execute_fetchall(
            "DELETE FROM lorebook_entries WHERE record_id = ? RETURNING uid", (rid,)
        )
        if delete and not list(gone):
            raise _missing(path)
        if not delete:
            entries = value if isinstance(value, dict) else {}
            await db.executemany(
                "INSERT INTO lorebook_entries (record_id, uid, seq, data) VALUES (?, ?, ?, ?)",
                [(rid, str(uid), seq, dumps(e)) for seq, (uid, e) in enumerate(entries.items())],
            )


async def _entry_row(db: SqliteConnection, rid: str, uid: str) -> Any:
    """The entry ``uid`` of the book ``rid``, parsed; ``None`` when it has none."""
    rows = list(
        await db.execute_fetchall(
            "SELECT data FROM lorebook_entries WHERE record_id = ? AND uid = ?", (rid, uid)
        )
    )
    return json.loads(str(rows[0][0])) if rows else None


async def _put_entry_row(db: SqliteConnection, rid: str, uid: str, entry: Any) -> None:
    """Write the entry's row: in its place when it has one, else after the book's last."""
    await db.execute(
        "INSERT INTO lorebook_entries (record_id, uid, seq, data) "
        "SELECT ?, ?, coalesce(max(seq) + 1, 0), ? FROM lorebook_entries WHERE record_id = ? "
        "ON CONFLICT (record_id, uid) DO UPDATE SET data = excluded.data",
        (rid, uid, dumps(entry), rid),
    )
