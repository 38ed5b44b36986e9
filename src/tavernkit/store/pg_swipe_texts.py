"""Streaming swipe texts on PostgreSQL in one statement: the swipe writer's batch (many chats'
swipes) was, per swipe, a locking read of its message and chat, the swipe's update and its
message's ``mes``, inside ``BEGIN``/``COMMIT``: 2 + 3 round trips per swipe. Here the batch is
one statement (one transaction by itself) whose steps are data-modifying ``WITH`` queries:
the messages and chats locked in message id order (the order every writer of a chat takes
them, see :meth:`~tavernkit.store.postgres.PostgresStore._lock_message`), then the swipes
that exist with text for their owner written, then the shown swipes' ``mes``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tavernkit.store.chat_types import SwipeText

if TYPE_CHECKING:
    from tavernkit.store.sqlite_thread import SqliteConnection

__all__ = ["write_swipe_texts"]

# ``?`` placeholders: PgConn numbers them. The batch comes as four arrays (unnest keeps their
# rows together); ``locked`` is MATERIALIZED so its row locks are taken, in its order, before
# the updates read it.
_SQL = (
    "WITH items AS MATERIALIZED (SELECT * FROM unnest(?::text[], ?::text[], ?::int[], ?::text[])"
    " AS i(message_id, owner, idx, text)), "
    "locked AS MATERIALIZED (SELECT m.id, c.owner FROM messages m JOIN chats c ON c.id = m.chat_id "
    "JOIN items i ON i.message_id = m.id AND i.owner = c.owner ORDER BY m.id FOR UPDATE OF m, c), "
    "written AS (UPDATE swipes s SET text = i.text, partial = 1 FROM items i "
    "WHERE s.message_id = i.message_id AND s.idx = i.idx AND s.text IS NOT NULL "
    "AND (i.message_id, i.owner) IN (SELECT id, owner FROM locked) "
    "RETURNING s.message_id, s.idx, i.owner, i.text), "
    "shown AS (UPDATE messages m SET mes = w.text FROM written w WHERE m.id = w.message_id "
    "AND strpos(m.extracted, 'mes') > 0 AND CASE WHEN json_typeof(m.body::json -> 'swipe_id') "
    "= 'number' THEN (m.body::json ->> 'swipe_id')::numeric END = w.idx) "
    "SELECT message_id, idx, owner FROM written"
)


async def write_swipe_texts(db: SqliteConnection, items: Sequence[SwipeText]) -> list[int]:
    """Write ``items`` in one statement on ``db`` (a connection outside any transaction); the
    positions of those whose swipe does not exist for its owner. A swipe named twice (for one
    owner) gets its last text (as writing them one after another did)."""
    last: dict[tuple[str, int, str], SwipeText] = {}
    for item in items:
        last[(item.message_id, item.swipe_index, item.owner)] = item
    batch = list(last.values())
    rows = await db.execute_fetchall(
        _SQL,
        (
            [i.message_id for i in batch],
            [i.owner for i in batch],
            [i.swipe_index for i in batch],
            [i.text for i in batch],
        ),
    )
    found = {(str(message_id), int(idx), str(owner)) for message_id, idx, owner in rows}
    return [n for n, i in enumerate(items) if (i.message_id, i.swipe_index, i.owner) not in found]
