"""What a turn reads first, on PostgreSQL in one statement: the owner's settings, the chat's
window (its row, the last messages, the hidden ones before the first shown) and the owner's
global variables (:meth:`~tavernkit.store.protocol.Store.load_turn_start`).

The shared code reads the window in a read-only transaction (``BEGIN``, the chat's row, its
messages, their swipes, ``COMMIT``) beside two reads of its own: seven round trips on three
connections. One statement sees one snapshot by itself, so here the messages come as arrays of
rows, each with its swipes as an array (asyncpg reads both as tuples), the settings and the
variables as two more columns: one round trip. The window is built by the same code as the
shared one's (:func:`~tavernkit.store._chat_rows.chat_window`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tavernkit.store._chat_rows import (
    CHAT_ROW_SQL,
    chat_window,
    pick_chat_row,
    stored_message,
)
from tavernkit.store._message_rows import FLAG_HIDDEN, SwipeRow
from tavernkit.store.chat_types import StoredChatWindow, StoredMessage

if TYPE_CHECKING:
    from tavernkit.store.sqlite_thread import SqliteConnection

__all__ = ["TurnStartRows", "read_turn_start"]

#: a message as a row: its columns, then its swipes' (in index order)
_MESSAGE = (
    "ROW(m.id, m.position, m.body, m.extracted, m.mes, ARRAY(SELECT ROW(s.idx, s.text, s.info, "
    "s.partial) FROM swipes s WHERE s.message_id = m.id ORDER BY s.idx))"
)
#: the chat's newest ``?`` messages (by the (chat_id, position) index)
_NEWEST = "SELECT * FROM messages WHERE chat_id = c.id ORDER BY position DESC LIMIT ?"

# ``?`` placeholders (PgConn numbers them): the chat row's four, then last, last, FLAG_HIDDEN,
# last, owner, owner. The chat row's columns are renamed (it has msg_total twice). The head is
# read only when the chat is longer than the tail: its oldest messages up to the first shown
# one, or up to the tail (LEAST skips a NULL: no message is shown).
_SQL = (
    "WITH c(id, name, owner, character_id, character_name, total, created, updated, header, "
    f"msg_total, msg_hidden, msg_user, msg_hidden_tools, k) AS MATERIALIZED ({CHAT_ROW_SQL}) "
    f"SELECT c.*, ARRAY(SELECT {_MESSAGE} FROM ({_NEWEST}) m ORDER BY m.position), "
    f"CASE WHEN c.msg_total > ? THEN ARRAY(SELECT {_MESSAGE} FROM messages m "
    "WHERE m.chat_id = c.id AND m.position <= LEAST((SELECT position FROM messages "
    "WHERE chat_id = c.id AND flags & ? = 0 ORDER BY position LIMIT 1), "
    f"(SELECT min(position) FROM ({_NEWEST}) t) - 1) ORDER BY m.position) END, "
    "(SELECT data FROM settings WHERE owner = ?), "
    "ARRAY(SELECT ROW(name, value) FROM global_variables WHERE owner = ? ORDER BY name) "
    "FROM c ORDER BY c.k"
)
#: where the window's columns start in a row: the chat row's 14 before them
_TAIL = 14


class TurnStartRows:
    """What :func:`read_turn_start` read: the window, the settings' stored text (``None``:
    none stored) and the global variables' ``(name, JSON text)`` rows."""

    def __init__(
        self, window: StoredChatWindow, settings: str | None, variables: list[tuple[str, str]]
    ) -> None:
        self.window = window
        self.settings = settings
        self.variables = variables


def _messages(rows: list[Any] | None) -> list[StoredMessage]:
    return [
        stored_message(
            mid,
            position,
            (body, extracted, mes),
            [SwipeRow(s[0], s[1], s[2], bool(s[3])) for s in swipes],
        )
        for mid, position, body, extracted, mes, swipes in rows or ()
    ]


async def read_turn_start(
    db: SqliteConnection, chat_ref: str, last: int, owner: str
) -> TurnStartRows:
    """Read a turn's start on ``db`` (a connection outside any transaction) in one statement."""
    rows = await db.execute_fetchall(
        _SQL, (chat_ref, owner, owner, chat_ref, last, last, FLAG_HIDDEN, last, owner, owner)
    )
    row = pick_chat_row(rows, chat_ref)
    tail, head, settings, variables = row[_TAIL:]
    window = chat_window(row, _messages(head), _messages(tail))
    return TurnStartRows(window, settings, [(str(n), str(v)) for n, v in variables])
