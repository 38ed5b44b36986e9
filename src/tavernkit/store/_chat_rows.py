"""A chat's rows as the store's values, shared by the SQLite store's reads and PostgreSQL's
one-statement turn start (:mod:`tavernkit.store.pg_turn_start`): the chat's row found by its
id or name, a window from its row and messages, a message from its row and its swipes'."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from tavernkit.errors import Conflict, NotFound
from tavernkit.models.chat_window import MessageCounts
from tavernkit.store._message_rows import SwipeRow, count_messages, decode_extracted, join_message
from tavernkit.store.chat_types import ChatInfo, StoredChatWindow, StoredMessage

__all__ = [
    "CHAT_COLS",
    "CHAT_ROW_SQL",
    "HEADER_COL",
    "chat_info",
    "chat_window",
    "pick_chat_row",
    "stored_message",
]

# msg_* are counters the triggers of migration 004 keep: no read counts a chat's messages.
CHAT_COLS = (
    "c.id, c.name, c.owner, c.character_id, c.character_name, c.msg_total, c.created, c.updated"
)
HEADER_COL = 8
_COUNT_COLS = ", c.header, c.msg_total, c.msg_hidden, c.msg_user, c.msg_hidden_tools"


def chat_info(row: Any) -> ChatInfo:
    return ChatInfo(
        id=row[0],
        name=row[1],
        owner=row[2],
        character_id=row[3],
        character_name=row[4],
        message_count=int(row[5]),
        created=datetime.fromisoformat(row[6]),
        updated=datetime.fromisoformat(row[7]),
    )


#: the chat ``ref`` names (its id, else its name) of an owner: ``(ref, owner, owner, ref)``
CHAT_ROW_SQL = (
    f"SELECT {CHAT_COLS}{_COUNT_COLS}, 0 AS k FROM chats c WHERE c.id = ? AND c.owner = ? "
    f"UNION ALL SELECT {CHAT_COLS}{_COUNT_COLS}, 1 FROM chats c "
    "WHERE c.owner = ? AND c.name = ? ORDER BY k LIMIT 2"
)


def pick_chat_row(rows: Sequence[Any], ref: str) -> Any:
    """The chat :data:`CHAT_ROW_SQL` found for ``ref``: the one with that id, else the one so
    named (none: :class:`NotFound`; several: :class:`Conflict`)."""
    if rows and rows[0][0] == ref:
        return rows[0]
    if not rows:
        raise NotFound(f"no chat {ref!r}")
    if len(rows) > 1:
        raise Conflict(f"more than one chat is named {ref!r}; use its id")
    return rows[0]


def chat_window(row: Any, head: list[StoredMessage], tail: list[StoredMessage]) -> StoredChatWindow:
    """The window of the chat :data:`CHAT_ROW_SQL`'s ``row`` with its ``head`` and ``tail``
    messages (what lies between is counted from the chat's counters)."""
    counts = MessageCounts(*(int(n) for n in row[HEADER_COL + 1 : HEADER_COL + 5]))
    loaded = count_messages(m.data for m in (*head, *tail))
    return StoredChatWindow(
        info=chat_info(row),
        header=json.loads(row[HEADER_COL]),
        head=head,
        tail=tail,
        gap=counts.minus(loaded),
    )


def stored_message(mid: str, position: int, row: Any, swipes: list[SwipeRow]) -> StoredMessage:
    """A message from its row's ``(body, extracted, mes)`` and its swipes' rows."""
    data = join_message(json.loads(row[0]), decode_extracted(row[1]), row[2], swipes)
    partial = tuple(sorted(r.idx for r in swipes if r.partial))
    return StoredMessage(id=mid, position=position, data=data, partial_swipes=partial)
