"""Swipes in SQLite: appending one (one row, and its message rewritten), streaming into one
(its text, and ``mes`` when it is the shown swipe, nothing else), many streaming swipes of many
chats in one transaction, picking and deleting one."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from tavernkit.errors import Conflict, NotFound, StoreError
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.store._message_rows import (
    SwipeRow,
    dumps,
)
from tavernkit.store._sqlite_base import to_json_doc
from tavernkit.store._sqlite_chats import SWIPE_INFO_FIELDS, SqliteChats
from tavernkit.store.chat_types import SwipeText
from tavernkit.store.sqlite_thread import SqliteConnection

__all__ = ["SqliteSwipes"]

# A streaming swipe's text (only a swipe that exists, of a chat of the owner), and the shown
# swipe's text on its message's ``mes``.
_SWIPE_TEXT_SQL = (
    "UPDATE swipes SET text = ?, partial = ? WHERE message_id = ? AND idx = ? "
    "AND text IS NOT NULL AND message_id IN (SELECT m.id FROM messages m "
    "JOIN chats c ON c.id = m.chat_id WHERE m.id = ? AND c.owner = ?)"
)
_SHOWN_TEXT_SQL = (
    "UPDATE messages SET mes = ? WHERE id = ? AND instr(extracted, 'mes') > 0 "
    "AND json_extract(body, '$.swipe_id') = ?"
)


class SqliteSwipes(SqliteChats):
    async def append_swipe(
        self,
        message_id: str,
        text: str,
        *,
        info: Mapping[str, Any] | None = None,
        activate: bool = True,
        complete: bool = True,
        owner: str = DEFAULT_OWNER,
    ) -> int:
        info_json = dumps(to_json_doc(info, source="<swipe_info>")) if info is not None else None
        async with self._write() as db:
            st = await self._message_state(db, message_id, owner)
            new_rows: list[SwipeRow] = []
            if "swipes" not in st.extracted:
                if "swipes" in st.body:
                    raise StoreError(f"message {message_id!r} has swipes that are not all text")
                # A message without swipes (a user message) gets its text as swipe 0 first.
                first_info = None
                if info is not None:
                    first_info = dumps({k: st.body[k] for k in SWIPE_INFO_FIELDS if k in st.body})
                new_rows.append(SwipeRow(0, st.mes or "", first_info))
                st.extracted.add("swipes")
                st.body["swipes"] = None
                st.body.setdefault("swipe_id", 0)
            if info is not None and "swipe_info" not in st.extracted:
                if "swipe_info" in st.body:
                    raise StoreError(f"message {message_id!r} has a swipe_info that is not a list")
                st.extracted.add("swipe_info")
                st.body["swipe_info"] = None
            idx = st.swipe_count() + len(new_rows)
            old = st.swipes.get(idx)
            if info_json is None and old is not None:
                info_json = old.info  # an info past the end of ``swipes`` in an imported file
            new_rows.append(SwipeRow(idx, text, info_json, not complete))
            await db.executemany(
                "INSERT INTO swipes (message_id, idx, text, info, partial) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (message_id, idx) DO UPDATE SET text = excluded.text, "
                "info = excluded.info, partial = excluded.partial",
                [(st.id, r.idx, r.text, r.info, int(r.partial)) for r in new_rows],
            )
            st.swipes.update((r.idx, r) for r in new_rows)
            if activate:
                st.show(idx)
            await self._save_state(db, st)
            await self._touch(db, st.chat_id)
        return idx

    async def update_swipe_text(
        self,
        message_id: str,
        swipe_index: int,
        text: str,
        *,
        complete: bool,
        owner: str = DEFAULT_OWNER,
    ) -> None:
        async with self._write() as db:
            await self._lock_message(db, message_id, owner)
            cur = await db.execute(
                _SWIPE_TEXT_SQL,
                (text, int(not complete), message_id, swipe_index, message_id, owner),
            )
            if cur.rowcount == 0:
                raise NotFound(f"no swipe {swipe_index} on message {message_id!r}")
            await db.execute(_SHOWN_TEXT_SQL, (text, message_id, swipe_index))
            if complete:
                await db.execute(
                    "UPDATE chats SET updated = ? WHERE id = "
                    "(SELECT chat_id FROM messages WHERE id = ?)",
                    (self._now(), message_id),
                )

    async def update_swipe_texts(self, items: Sequence[SwipeText]) -> list[int]:
        if not items:
            return []
        async with self._write() as db:
            return await self._write_swipe_texts(db, items)

    async def _write_swipe_texts(
        self, db: SqliteConnection, items: Sequence[SwipeText]
    ) -> list[int]:
        """SQLite: the batch's updates in one trip to the database thread, each with its own
        row count (a swipe that changed nothing is missing: not ``total_changes``, which an
        update here can count twice), then the shown swipes' ``mes`` in one ``executemany``."""
        rows = [(i.text, 1, i.message_id, i.swipe_index, i.message_id, i.owner) for i in items]

        def each(conn: sqlite3.Connection) -> list[int]:
            return [conn.execute(_SWIPE_TEXT_SQL, row).rowcount for row in rows]

        missing = [n for n, changed in enumerate(await db.run(each)) if changed == 0]
        skip = set(missing)
        await db.executemany(
            _SHOWN_TEXT_SQL,
            [(i.text, i.message_id, i.swipe_index) for n, i in enumerate(items) if n not in skip],
        )
        return missing

    async def _lock_message(self, db: SqliteConnection, message_id: str, owner: str) -> None:
        """Take the row locks of a message and its chat before writing its swipes; a store
        whose writers lock rows (PostgreSQL) needs every writer of a chat to take them in one
        order. SQLite has one writer at a time: nothing to do."""

    async def set_active_swipe(
        self, message_id: str, swipe_index: int, *, owner: str = DEFAULT_OWNER
    ) -> None:
        async with self._write() as db:
            st = await self._message_state(db, message_id, owner)
            if not 0 <= swipe_index < st.swipe_count():
                raise NotFound(f"no swipe {swipe_index} on message {message_id!r}")
            st.show(swipe_index)
            await self._save_state(db, st)
            await self._touch(db, st.chat_id)

    async def delete_swipe(
        self, message_id: str, swipe_index: int, *, owner: str = DEFAULT_OWNER
    ) -> None:
        async with self._write() as db:
            st = await self._message_state(db, message_id, owner)
            count = st.swipe_count()
            if not 0 <= swipe_index < count:
                raise NotFound(f"no swipe {swipe_index} on message {message_id!r}")
            if count == 1:
                raise Conflict("cannot delete a message's last swipe; delete the message")
            await db.execute(
                "DELETE FROM swipes WHERE message_id = ? AND idx = ?", (st.id, swipe_index)
            )
            # Two steps, so no intermediate state breaks the (message_id, idx) key.
            await db.execute(
                "UPDATE swipes SET idx = -idx WHERE message_id = ? AND idx > ?",
                (st.id, swipe_index),
            )
            await db.execute(
                "UPDATE swipes SET idx = -idx - 1 WHERE message_id = ? AND idx < 0", (st.id,)
            )
            st.swipes = {
                (r.idx if r.idx < swipe_index else r.idx - 1): SwipeRow(
                    r.idx if r.idx < swipe_index else r.idx - 1, r.text, r.info, r.partial
                )
                for r in st.swipes.values()
                if r.idx != swipe_index
            }
            shown = st.body.get("swipe_id")
            if isinstance(shown, int) and not isinstance(shown, bool):
                if shown > swipe_index:
                    st.body["swipe_id"] = shown - 1
                elif shown == swipe_index:
                    st.show(min(swipe_index, count - 2))
            await self._save_state(db, st)
            await self._touch(db, st.chat_id)
