"""Chats and messages in SQLite (their swipes: :mod:`tavernkit.store._sqlite_swipes`).

A chat is a ``chats`` row (the header line as JSON), one ``messages`` row per message and one
``swipes`` row per swipe (see :mod:`tavernkit.store._message_rows`). Every change to a chat is
confined to the rows it concerns: appending a message inserts its row and its swipes' rows;
appending a swipe inserts one row and rewrites its one message; streaming into a swipe updates
its text (and ``mes`` when it is the shown swipe) and nothing else. No call reads or writes the
other messages, so a 2,500-message chat costs the same to append to as a 10-message one.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from pydantic import BaseModel

from tavernkit.errors import NotFound, StoreError
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.store._chat_rows import (
    CHAT_COLS,
    CHAT_ROW_SQL,
    HEADER_COL,
    chat_info,
    chat_window,
    pick_chat_row,
    stored_message,
)
from tavernkit.store._message_rows import (
    FLAG_HIDDEN,
    SplitMessage,
    SwipeRow,
    decode_extracted,
    dumps,
    encode_extracted,
    join_message,
    message_flags,
    split_message,
)
from tavernkit.store._sqlite_base import SqliteBase, to_json_doc
from tavernkit.store.chat_types import ChatInfo, StoredChat, StoredChatWindow, StoredMessage
from tavernkit.store.sqlite_thread import SqliteConnection

__all__ = ["SWIPE_INFO_FIELDS", "MessageState", "SqliteChats"]

#: What SillyTavern copies from a swipe's info to the message when that swipe is shown.
SWIPE_INFO_FIELDS = ("send_date", "gen_started", "gen_finished", "extra")


def _integrity(head: Mapping[str, Any]) -> str | None:
    """The header's ``chat_metadata.integrity`` id (SillyTavern's id of a chat and its
    branches), kept in a column of its own for :meth:`SqliteChats.chats_with_integrity`."""
    meta = head.get("chat_metadata")
    found = meta.get("integrity") if isinstance(meta, Mapping) else None
    return found if isinstance(found, str) else None


class MessageState:
    """A message loaded for an edit of its own: body, extracted keys, mes and swipe rows."""

    def __init__(self, mid: str, chat_id: str, position: int, row: Any, swipes: list[SwipeRow]):
        self.id = mid
        self.chat_id = chat_id
        self.position = position
        self.body: dict[str, Any] = json.loads(row[0])
        self.extracted = set(decode_extracted(row[1]))
        self.mes: str | None = row[2]
        self.swipes = {r.idx: r for r in swipes}

    def swipe_count(self) -> int:
        return sum(1 for r in self.swipes.values() if r.text is not None)

    def show(self, idx: int) -> None:
        """Make swipe ``idx`` the shown one, as SillyTavern does on a swipe."""
        row = self.swipes[idx]
        self.body["swipe_id"] = idx
        self._set_mes(row.text or "")
        if row.info is not None:
            info = json.loads(row.info)
            if isinstance(info, dict):
                for key in SWIPE_INFO_FIELDS:
                    if key in info:
                        self.body[key] = info[key]

    def _set_mes(self, text: str) -> None:
        if "mes" not in self.extracted:
            self.extracted.add("mes")
        self.body["mes"] = None
        self.mes = text


class SqliteChats(SqliteBase):
    # -- reading ---------------------------------------------------------------------------
    async def _chat_row(self, db: SqliteConnection, ref: str, owner: str) -> Any:
        # One query: the id's row sorts first if there is one. Two lookups joined, each on its
        # index: with ``id = ? OR name = ?`` SQLite read every chat of the owner (0.65 ms at
        # 2,000 chats, twice a turn).
        rows = list(await db.execute_fetchall(CHAT_ROW_SQL, (ref, owner, owner, ref)))
        return pick_chat_row(rows, ref)

    async def list_chats(
        self, *, owner: str = DEFAULT_OWNER, character: str | None = None
    ) -> list[ChatInfo]:
        async with self._read() as db:
            if character is None:
                sql = f"SELECT {CHAT_COLS} FROM chats c WHERE c.owner = ? ORDER BY c.updated DESC"
                params: tuple[Any, ...] = (owner,)
            else:
                info, _ = await self._resolve(db, "character", character, owner)
                sql = (
                    f"SELECT {CHAT_COLS} FROM chats c WHERE c.owner = ? AND c.character_id = ? "
                    "ORDER BY c.updated DESC"
                )
                params = (owner, info.id)
            async with db.execute(sql, params) as cur:
                return [chat_info(r) for r in await cur.fetchall()]

    async def chats_with_integrity(
        self, integrity: str, *, owner: str = DEFAULT_OWNER
    ) -> list[ChatInfo]:
        async with self._read() as db:
            sql = (
                f"SELECT {CHAT_COLS} FROM chats c WHERE c.owner = ? AND c.integrity = ? "
                "ORDER BY c.updated DESC"
            )
            async with db.execute(sql, (owner, integrity)) as cur:
                return [chat_info(r) for r in await cur.fetchall()]

    async def get_chat_info(self, ref: str, *, owner: str = DEFAULT_OWNER) -> ChatInfo:
        async with self._read_now(snapshot=False) as db:  # one statement
            return chat_info(await self._chat_row(db, ref, owner))

    async def load_chat(self, ref: str, *, owner: str = DEFAULT_OWNER) -> StoredChat:
        async with self._read() as db:
            row = await self._chat_row(db, ref, owner)
            chat_id = row[0]
            swipes: dict[str, list[SwipeRow]] = {}
            async with db.execute(
                "SELECT s.message_id, s.idx, s.text, s.info, s.partial FROM swipes s "
                "JOIN messages m ON m.id = s.message_id WHERE m.chat_id = ?",
                (chat_id,),
            ) as cur:
                async for s in cur:
                    swipes.setdefault(s[0], []).append(SwipeRow(s[1], s[2], s[3], bool(s[4])))
            async with db.execute(
                "SELECT id, position, body, extracted, mes FROM messages "
                "WHERE chat_id = ? ORDER BY position",
                (chat_id,),
            ) as cur:
                messages = [
                    stored_message(m[0], m[1], m[2:], swipes.get(m[0], []))
                    for m in await cur.fetchall()
                ]
        return StoredChat(
            info=chat_info(row), header=json.loads(row[HEADER_COL]), messages=messages
        )

    async def load_chat_window(
        self, ref: str, *, last: int, owner: str = DEFAULT_OWNER
    ) -> StoredChatWindow:
        if last < 1:
            raise StoreError(f"a chat window holds at least one message, not {last}")
        async with self._read_now() as db:
            return await self._window(db, ref, last, owner)

    async def _window(
        self, db: SqliteConnection, ref: str, last: int, owner: str
    ) -> StoredChatWindow:
        """:meth:`load_chat_window` on ``db``: its only awaits are ``db``'s, so it also runs
        to its end in one step over a connection whose calls never wait (see
        :meth:`SqliteStore.load_turn_start`)."""
        row = await self._chat_row(db, ref, owner)
        chat_id, total = row[0], int(row[5])
        # The newest ``last`` by the (chat_id, position) index, read newest first.
        tail = await self._message_rows(
            db,
            "WHERE chat_id = ? ORDER BY position DESC LIMIT ?",
            (chat_id, last),
        )
        tail.reverse()
        head: list[StoredMessage] = []
        if len(tail) < total:
            # The oldest messages up to the first visible one (what the scan substitutes).
            first = await self._scalar(
                db,
                "SELECT position FROM messages WHERE chat_id = ? AND flags & ? = 0 "
                "ORDER BY position LIMIT 1",
                (chat_id, FLAG_HIDDEN),
            )
            upto = tail[0].position - 1 if first is None else min(first, tail[0].position - 1)
            head = await self._message_rows(
                db, "WHERE chat_id = ? AND position <= ? ORDER BY position", (chat_id, upto)
            )
        return chat_window(row, head, tail)

    async def load_message_range(
        self, ref: str, *, start: int, stop: int, owner: str = DEFAULT_OWNER
    ) -> list[StoredMessage]:
        if start < 0 or stop < start:
            raise StoreError(f"no message range {start}..{stop}")
        async with self._read_now() as db:
            row = await self._chat_row(db, ref, owner)
            return await self._message_rows(
                db,
                "WHERE chat_id = ? AND position >= ? AND position < ? ORDER BY position",
                (row[0], start, stop),
            )

    @staticmethod
    async def _scalar(db: SqliteConnection, sql: str, params: tuple[Any, ...]) -> Any:
        rows = list(await db.execute_fetchall(sql, params))
        return rows[0][0] if rows else None

    async def _message_rows(
        self, db: SqliteConnection, where: str, params: tuple[Any, ...]
    ) -> list[StoredMessage]:
        """The messages ``where`` selects (in its order), with their swipes."""
        rows = list(
            await db.execute_fetchall(
                f"SELECT id, position, body, extracted, mes FROM messages {where}", params
            )
        )
        swipes: dict[str, list[SwipeRow]] = {}
        ids = [r[0] for r in rows]
        for start in range(0, len(ids), 500):  # SQLite's bound-parameter limit
            chunk = ids[start : start + 500]
            for s in await db.execute_fetchall(
                "SELECT message_id, idx, text, info, partial FROM swipes WHERE message_id IN "
                f"({','.join('?' * len(chunk))})",
                chunk,
            ):
                swipes.setdefault(s[0], []).append(SwipeRow(s[1], s[2], s[3], bool(s[4])))
        return [stored_message(r[0], r[1], r[2:], swipes.get(r[0], [])) for r in rows]

    async def _message_state(
        self, db: SqliteConnection, message_id: str, owner: str
    ) -> MessageState:
        async with db.execute(
            "SELECT m.chat_id, m.position, m.body, m.extracted, m.mes FROM messages m "
            "JOIN chats c ON c.id = m.chat_id WHERE m.id = ? AND c.owner = ?",
            (message_id, owner),
        ) as cur:
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no message {message_id!r}")
        async with db.execute(
            "SELECT idx, text, info, partial FROM swipes WHERE message_id = ?", (message_id,)
        ) as cur:
            swipes = [SwipeRow(s[0], s[1], s[2], bool(s[3])) for s in await cur.fetchall()]
        return MessageState(message_id, row[0], row[1], row[2:], swipes)

    async def get_message(self, message_id: str, *, owner: str = DEFAULT_OWNER) -> StoredMessage:
        async with self._read() as db:
            st = await self._message_state(db, message_id, owner)
        swipes = list(st.swipes.values())
        data = join_message(st.body, frozenset(st.extracted), st.mes, swipes)
        partial = tuple(sorted(r.idx for r in swipes if r.partial))
        return StoredMessage(id=st.id, position=st.position, data=data, partial_swipes=partial)

    # -- whole chats -----------------------------------------------------------------------
    async def create_chat(
        self,
        header: Mapping[str, Any] | BaseModel,
        messages: Sequence[Mapping[str, Any] | BaseModel] = (),
        *,
        owner: str = DEFAULT_OWNER,
        name: str,
        character: str | None = None,
    ) -> ChatInfo:
        head = to_json_doc(header, source="<chat header>")
        docs = [to_json_doc(m, source=f"<chat message {i}>") for i, m in enumerate(messages)]
        if not name:
            raise StoreError("a chat needs a name")
        now = self._now()
        chat_id = self._new_id()
        async with self._write() as db:
            char_id = char_name = None
            if character is not None:
                info, _ = await self._resolve(db, "character", character, owner)
                char_id, char_name = info.id, info.name
            await db.execute(
                "INSERT INTO chats (id, owner, character_id, character_name, name, header, "
                "created, updated, integrity) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (chat_id, owner, char_id, char_name, name, dumps(head), now, now, _integrity(head)),
            )
            await self._insert_messages(db, chat_id, 0, docs)
        return await self.get_chat_info(chat_id, owner=owner)

    def _new_messages(
        self, docs: list[dict[str, Any]], last_partial: Collection[int] = ()
    ) -> list[tuple[str, SplitMessage]]:
        """``docs`` as rows to insert: each a new id and its split (the last one's swipes at
        ``last_partial`` marked partial)."""
        splits = [split_message(d) for d in docs]
        if last_partial and splits:
            splits[-1] = _marked_partial(splits[-1], last_partial)
        return [(self._new_id(), split) for split in splits]

    async def _insert_messages(
        self,
        db: SqliteConnection,
        chat_id: str,
        start: int,
        docs: list[dict[str, Any]],
        last_partial: Collection[int] = (),
    ) -> list[str]:
        new = self._new_messages(docs, last_partial)
        ids = [mid for mid, _ in new]
        splits = [split for _, split in new]
        await db.executemany(
            "INSERT INTO messages (id, chat_id, position, body, extracted, mes, flags) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (mid, chat_id, start + i, s.body_json, s.extracted_text, s.mes, s.flags)
                for i, (mid, s) in enumerate(zip(ids, splits, strict=True))
            ],
        )
        await self._insert_swipes(db, zip(ids, splits, strict=True))
        return ids

    @staticmethod
    async def _insert_swipes(db: SqliteConnection, items: Any) -> None:
        rows = [
            (mid, r.idx, r.text, r.info, int(r.partial))
            for mid, split in items
            for r in split.swipes
        ]
        if rows:
            await db.executemany(
                "INSERT INTO swipes (message_id, idx, text, info, partial) VALUES (?, ?, ?, ?, ?)",
                rows,
            )

    async def delete_chat(self, ref: str, *, owner: str = DEFAULT_OWNER) -> None:
        async with self._write() as db:
            row = await self._chat_row(db, ref, owner)
            await db.execute("DELETE FROM chats WHERE id = ?", (row[0],))

    async def rename_chat(self, ref: str, name: str, *, owner: str = DEFAULT_OWNER) -> None:
        if not name:
            raise StoreError("a chat needs a name")
        async with self._write() as db:
            row = await self._chat_row(db, ref, owner)
            await db.execute(
                "UPDATE chats SET name = ?, updated = ? WHERE id = ?", (name, self._now(), row[0])
            )

    async def set_chats_character_name(
        self, character_id: str, name: str, *, owner: str = DEFAULT_OWNER
    ) -> int:
        async with self._write() as db:
            cur = await db.execute(
                "UPDATE chats SET character_name = ? WHERE character_id = ? AND owner = ?",
                (name, character_id, owner),
            )
            return int(cur.rowcount)

    async def attach_chat(
        self, chat_id: str, character: str, *, owner: str = DEFAULT_OWNER
    ) -> bool:
        async with self._write() as db:
            info, _ = await self._resolve(db, "character", character, owner)
            cur = await db.execute(
                "UPDATE chats SET character_id = ?, character_name = ? "
                "WHERE id = ? AND owner = ? AND character_id IS NULL",
                (info.id, info.name, chat_id, owner),
            )
            return bool(cur.rowcount)

    async def update_chat_header(
        self, chat_id: str, header: Mapping[str, Any] | BaseModel, *, owner: str = DEFAULT_OWNER
    ) -> None:
        head = to_json_doc(header, source="<chat header>")
        async with self._write() as db:
            await self._set_header(db, chat_id, owner, head)

    async def update_chat_metadata(
        self, chat_id: str, metadata: Mapping[str, Any], *, owner: str = DEFAULT_OWNER
    ) -> None:
        meta = to_json_doc(metadata, source="<chat_metadata>")
        async with self._write() as db:
            async with db.execute(
                "SELECT header FROM chats WHERE id = ? AND owner = ?", (chat_id, owner)
            ) as cur:
                row = await cur.fetchone()
            if row is None:
                raise NotFound(f"no chat {chat_id!r}")
            head = json.loads(row[0])
            head["chat_metadata"] = meta
            await self._set_header(db, chat_id, owner, head)

    async def _set_header(
        self, db: SqliteConnection, chat_id: str, owner: str, head: dict[str, Any]
    ) -> None:
        cur = await db.execute(
            "UPDATE chats SET header = ?, updated = ?, integrity = ? WHERE id = ? AND owner = ?",
            (dumps(head), self._now(), _integrity(head), chat_id, owner),
        )
        if cur.rowcount == 0:
            raise NotFound(f"no chat {chat_id!r}")

    async def _touch(self, db: SqliteConnection, chat_id: str) -> None:
        await db.execute("UPDATE chats SET updated = ? WHERE id = ?", (self._now(), chat_id))

    # -- messages --------------------------------------------------------------------------
    async def append_message(
        self, chat_id: str, message: Mapping[str, Any] | BaseModel, *, owner: str = DEFAULT_OWNER
    ) -> StoredMessage:
        (stored,) = await self.append_messages(chat_id, [message], owner=owner)
        return stored

    async def append_messages(
        self,
        chat_id: str,
        messages: Sequence[Mapping[str, Any] | BaseModel],
        *,
        owner: str = DEFAULT_OWNER,
        last_partial: Collection[int] = (),
        detached: bool = False,
    ) -> list[StoredMessage]:
        docs = [to_json_doc(m, source="<chat message>") for m in messages]
        position, ids = await self._append_rows(chat_id, owner, docs, last_partial, detached)
        return [
            StoredMessage(id=mid, position=position + i, data=doc)
            for i, (mid, doc) in enumerate(zip(ids, docs, strict=True))
        ]

    async def _append_rows(
        self,
        chat_id: str,
        owner: str,
        docs: list[dict[str, Any]],
        last_partial: Collection[int],
        detached: bool,
    ) -> tuple[int, list[str]]:
        """Insert ``docs`` after the chat's last message: the first one's position and the
        new messages' ids."""

        async def append(db: SqliteConnection) -> tuple[int, list[str]]:
            # MAX over the (chat_id, position) index reads one index entry, not the chat.
            found = list(
                await db.execute_fetchall(
                    "SELECT c.id, (SELECT MAX(position) FROM messages WHERE chat_id = c.id) "
                    "FROM chats c WHERE c.id = ? AND c.owner = ?",
                    (chat_id, owner),
                )
            )
            if not found:
                raise NotFound(f"no chat {chat_id!r}")
            row = found[0]
            position = 0 if row[1] is None else int(row[1]) + 1
            ids = await self._insert_messages(db, chat_id, position, docs, last_partial)
            await self._touch(db, chat_id)
            return position, ids

        if detached:  # a turn's reply place (and user message): one trip to the thread
            return await self._write_at_once(append)
        async with self._write() as db:
            return await append(db)

    async def update_message(
        self,
        message_id: str,
        message: Mapping[str, Any] | BaseModel,
        *,
        partial: Collection[int] = (),
        owner: str = DEFAULT_OWNER,
    ) -> None:
        split = split_message(to_json_doc(message, source="<chat message>"))
        if partial:
            split = _marked_partial(split, partial)
        await self._replace_message(message_id, owner, split)

    async def _replace_message(self, message_id: str, owner: str, split: SplitMessage) -> None:
        """Write the owner's message ``message_id`` as ``split``: its row, its swipes whole."""
        async with self._write() as db:
            chat_id = await self._message_chat(db, message_id, owner)
            await self._write_message(db, message_id, split)
            await db.execute("DELETE FROM swipes WHERE message_id = ?", (message_id,))
            await self._insert_swipes(db, [(message_id, split)])
            await self._touch(db, chat_id)

    @staticmethod
    async def _message_chat(db: SqliteConnection, message_id: str, owner: str) -> str:
        """The chat of the owner's message ``message_id``: its row and its chat's read as
        :meth:`_message_state` reads them (so locked first where the store locks rows), but
        not its swipes, which the caller replaces whole."""
        rows = list(
            await db.execute_fetchall(
                "SELECT m.chat_id FROM messages m JOIN chats c ON c.id = m.chat_id "
                "WHERE m.id = ? AND c.owner = ?",
                (message_id, owner),
            )
        )
        if not rows:
            raise NotFound(f"no message {message_id!r}")
        return str(rows[0][0])

    @staticmethod
    async def _write_message(db: SqliteConnection, mid: str, split: SplitMessage) -> None:
        await db.execute(
            "UPDATE messages SET body = ?, extracted = ?, mes = ?, flags = ? WHERE id = ?",
            (split.body_json, split.extracted_text, split.mes, split.flags, mid),
        )

    async def _save_state(self, db: SqliteConnection, st: MessageState) -> None:
        await db.execute(
            "UPDATE messages SET body = ?, extracted = ?, mes = ?, flags = ? WHERE id = ?",
            (
                dumps(st.body),
                encode_extracted(st.extracted),
                st.mes,
                message_flags(st.body),
                st.id,
            ),
        )

    async def truncate_chat(
        self, chat_id: str, position: int, *, owner: str = DEFAULT_OWNER
    ) -> int:
        async with self._write() as db:
            row = await self._chat_row(db, chat_id, owner)
            cur = await db.execute(
                "DELETE FROM messages WHERE chat_id = ? AND position >= ?", (row[0], position)
            )
            await self._cut_tree(db, row[0], position)
            await self._touch(db, row[0])
            return max(cur.rowcount, 0)

    async def _cut_tree(self, db: SqliteConnection, chat_id: str, position: int) -> None:
        """Drop what of the chat's tree continued the deleted messages (the tree store's)."""


def _marked_partial(split: SplitMessage, partial: Collection[int]) -> SplitMessage:
    """``split`` with the swipes at the indexes in ``partial`` marked partial, the others not."""
    marks = frozenset(partial)
    return replace(split, swipes=[replace(r, partial=r.idx in marks) for r in split.swipes])
