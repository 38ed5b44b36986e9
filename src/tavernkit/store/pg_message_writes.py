"""A turn's two message writes on PostgreSQL, each one statement: appending its messages (the
user's and the reply's place) and writing its finished reply.

The shared code runs each as a transaction of several statements (``BEGIN``, a locking read,
the inserts or the update, the swipes, the chat's ``updated``, ``COMMIT``): six and seven round
trips, each a wake-up of the server's backend and of this process. Here each is one statement
(a transaction by itself) whose steps are data-modifying ``WITH`` queries, as
:mod:`tavernkit.store.pg_swipe_texts` does for the streamed text. The rows are locked as every
writer of a chat locks them (the chat's; a message's and its chat's), and the statement
triggers (message counts, storage use) fire once, at its end, seeing all of it.

An append's next position is read in the statement's snapshot, taken before it waited for the
chat's lock: an append that waited for another one would take the position that one took. The
unique ``(chat_id, position)`` index refuses that row, and the caller then appends as the shared
code does (a transaction whose locking read is made again once the lock is held): the one
round trip is for a chat nobody else is appending to at that moment, which is a turn's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tavernkit.errors import NotFound
from tavernkit.store._message_rows import SplitMessage

if TYPE_CHECKING:
    from tavernkit.store.sqlite_thread import SqliteConnection

__all__ = ["append_message_rows", "replace_message_row"]

# ``?`` placeholders: PgConn numbers them. ``chat`` is MATERIALIZED so the chat's row lock is
# taken before the inserts; the messages and the swipes come as arrays (unnest keeps a row's
# values together), the swipes naming their message by id.
_APPEND_SQL = (
    "WITH chat AS MATERIALIZED (SELECT c.id FROM chats c WHERE c.id = ? AND c.owner = ? "
    "FOR UPDATE), "
    "next AS MATERIALIZED (SELECT coalesce(max(m.position) + 1, 0) AS at FROM messages m "
    "WHERE m.chat_id = (SELECT id FROM chat)), "
    "added AS (INSERT INTO messages (id, chat_id, position, body, extracted, mes, flags) "
    "SELECT i.id, chat.id, next.at + i.n - 1, i.body, i.extracted, i.mes, i.flags "
    "FROM chat, next, unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::int[]) "
    "WITH ORDINALITY AS i(id, body, extracted, mes, flags, n) RETURNING id), "
    "swiped AS (INSERT INTO swipes (message_id, idx, text, info, partial) "
    "SELECT s.message_id, s.idx, s.text, s.info, s.partial "
    "FROM unnest(?::text[], ?::int[], ?::text[], ?::text[], ?::int[]) "
    "AS s(message_id, idx, text, info, partial) WHERE s.message_id IN (SELECT id FROM added)), "
    "touched AS (UPDATE chats SET updated = ? WHERE id = (SELECT id FROM chat)) "
    "SELECT at FROM chat, next"
)

# The message and its chat locked (in the order of PostgresStore._lock_message), the row
# rewritten, its swipes made ``split``'s: the ones it no longer has deleted, the others
# written in place (an upsert; deleting and inserting one key in one statement would collide).
_REPLACE_SQL = (
    "WITH msg AS MATERIALIZED (SELECT m.id, m.chat_id FROM messages m "
    "JOIN chats c ON c.id = m.chat_id WHERE m.id = ? AND c.owner = ? FOR UPDATE OF m, c), "
    "written AS (UPDATE messages m SET body = ?, extracted = ?, mes = ?, flags = ? "
    "FROM msg WHERE m.id = msg.id), "
    "items AS (SELECT * FROM unnest(?::int[], ?::text[], ?::text[], ?::int[]) "
    "AS s(idx, text, info, partial)), "
    "dropped AS (DELETE FROM swipes s USING msg WHERE s.message_id = msg.id "
    "AND s.idx NOT IN (SELECT idx FROM items)), "
    "kept AS (INSERT INTO swipes (message_id, idx, text, info, partial) "
    "SELECT msg.id, i.idx, i.text, i.info, i.partial FROM msg, items i "
    "ON CONFLICT (message_id, idx) DO UPDATE SET text = excluded.text, info = excluded.info, "
    "partial = excluded.partial), "
    "touched AS (UPDATE chats SET updated = ? FROM msg WHERE chats.id = msg.chat_id) "
    "SELECT chat_id FROM msg"
)


def _is_position_taken(exc: BaseException) -> bool:
    import asyncpg  # optional extra, imported where used

    return isinstance(exc, asyncpg.UniqueViolationError) and "position" in (
        getattr(exc, "constraint_name", None) or ""
    )


async def append_message_rows(
    db: SqliteConnection,
    chat_id: str,
    owner: str,
    rows: Sequence[tuple[str, SplitMessage]],
    now: str,
) -> int | None:
    """Insert ``rows`` (a new id and its split each) after the owner's chat's last message,
    on ``db`` (a connection outside any transaction); the first one's position, or None when
    a concurrent append took it (nothing was written: see the module docstring)."""
    swipes = [(mid, r) for mid, split in rows for r in split.swipes]
    params = (
        chat_id,
        owner,
        [mid for mid, _ in rows],
        [split.body_json for _, split in rows],
        [split.extracted_text for _, split in rows],
        [split.mes for _, split in rows],
        [split.flags for _, split in rows],
        [mid for mid, _ in swipes],
        [r.idx for _, r in swipes],
        [r.text for _, r in swipes],
        [r.info for _, r in swipes],
        [int(r.partial) for _, r in swipes],
        now,
    )
    try:
        found = await db.execute_fetchall(_APPEND_SQL, params)
    except Exception as exc:
        if _is_position_taken(exc):
            return None
        raise
    if not found:
        raise NotFound(f"no chat {chat_id!r}")
    return int(found[0][0])


async def replace_message_row(
    db: SqliteConnection, message_id: str, owner: str, split: SplitMessage, now: str
) -> None:
    """Write the owner's message ``message_id`` as ``split`` on ``db`` (a connection outside
    any transaction): its row, its swipes whole, its chat's ``updated``."""
    found = await db.execute_fetchall(
        _REPLACE_SQL,
        (
            message_id,
            owner,
            split.body_json,
            split.extracted_text,
            split.mes,
            split.flags,
            [r.idx for r in split.swipes],
            [r.text for r in split.swipes],
            [r.info for r in split.swipes],
            [int(r.partial) for r in split.swipes],
            now,
        ),
    )
    if not found:
        raise NotFound(f"no message {message_id!r}")
