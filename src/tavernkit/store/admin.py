"""Store administration: which migrations a database has (``tavernkit migrate``), and copying
everything one store holds into another, empty one: SQLite into PostgreSQL (``tavernkit
copy-data --to URL``) and back (``--from URL``).

Both stores have the same tables (the PostgreSQL migrations mirror SQLite's) and share their SQL
code, so the copy is row for row: ids, owners, names, timestamps, revisions, link and blob
order, message positions, swipe rows and their partial marks all arrive as they were, and
every reference (a profile's key id, a chat's character) still holds. The message counters
on each chat are not copied but recounted by the target's triggers as its messages arrive.
API key secrets travel as they are stored, sealed (:mod:`tavernkit.store.secret_key`), with the
sealed secret their fingerprints are keyed with (``store_secrets``): the copy never opens one,
and the target's processes need the same secret key as the source's.

The source is read in one transaction (one consistent state) and the target written in one:
a copy that fails leaves the target as empty as it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tavernkit.errors import Conflict, StoreError
from tavernkit.store.postgres import PostgresStore
from tavernkit.store.sqlite import SqliteStore

__all__ = ["COPIED_TABLES", "CopyReport", "applied_migrations", "copy_store"]

#: table -> (columns copied, the order rows are read and written in). Parents come before
#: the rows that refer to them.
COPIED_TABLES: tuple[tuple[str, str, str], ...] = (
    ("records", "id, owner, kind, name, name_key, data, created, updated, revision", "id"),
    # a lorebook's entries (016), in each book's order
    ("lorebook_entries", "record_id, uid, seq, data", "record_id, seq"),
    # written in the order first stored, which is the order list_blobs gives
    ("record_blobs", "record_id, name, data", "rowid"),
    ("record_links", "from_id, rel, to_id, position", "from_id, rel, position"),
    ("settings", "owner, data, updated", "owner"),
    ("global_variables", "owner, name, value, updated", "owner, name"),
    # the store's own sealed secrets (015): the fingerprint secret
    ("store_secrets", "name, sealed", "name"),
    ("api_keys", "id, owner, provider, label, secret, fingerprint, created", "id"),
    (
        "key_state",
        "key_id, cooldown_until, failures, last_error_code, last_used, updated, uses",
        "key_id",
    ),
    (
        "key_rests",
        "key_id, model, cooldown_until, failures, last_error_code, last_used, updated",
        "key_id, model",
    ),
    (
        "chats",
        "id, owner, character_id, character_name, name, header, created, updated, integrity",
        "id",
    ),
    ("messages", "id, chat_id, position, body, extracted, mes, flags", "chat_id, position"),
    ("swipes", "message_id, idx, text, info, partial", "message_id, idx"),
    # a chat's tree (017): its branches, then the messages parked off the current path
    ("chat_branches", "chat_id, id, parent, fork, current, created", "chat_id, id"),
    (
        "branch_messages",
        "chat_id, branch_id, position, message_id, data, partial",
        "chat_id, branch_id, position",
    ),
    # the server's accounts (005); tokens and sessions are hashes, copied as they are
    (
        "users",
        "id, name, name_key, owner, password_hash, is_admin, shared_fallback, created",
        "id",
    ),
    ("api_tokens", "id, user_id, token_hash, label, created, last_used", "id"),
    ("sessions", "id, user_id, session_hash, created, expires", "id"),
    # memory's vectors (007), with their insertion order (``seq``: score ties follow it)
    ("memory_vectors", "seq, owner, collection, space, hash, label, text, vector", "seq"),
)

#: PostgreSQL's next ``memory_vectors.seq`` after rows came with their own (a BIGSERIAL's
#: sequence does not move for values it did not give); a WITH, so the store's connection adds
#: no FOR UPDATE to the aggregate
_PG_NEXT_SEQ = (
    "WITH top AS (SELECT coalesce(max(seq), 0) + 1 AS next FROM memory_vectors) "
    "SELECT setval(pg_get_serial_sequence('memory_vectors', 'seq'), next, false) FROM top"
)


@dataclass
class CopyReport:
    """How many rows of each table were copied, and how many (sealed) key secrets."""

    rows: dict[str, int] = field(default_factory=dict)
    secrets: int = 0


async def copy_store(source: SqliteStore, target: SqliteStore) -> CopyReport:
    """Copy all of ``source`` into ``target``, which must hold nothing yet (see the module
    docstring). Raises :class:`~tavernkit.errors.Conflict` when it does."""
    if source is target:
        raise StoreError("cannot copy a store into itself")
    tables: dict[str, list[tuple[object, ...]]] = {}
    async with source._read() as db:  # the stores' own package
        for table, columns, order in COPIED_TABLES:
            found = await db.execute_fetchall(f"SELECT {columns} FROM {table} ORDER BY {order}")
            tables[table] = [tuple(r) for r in found]
    report = CopyReport()
    async with target._write() as db:  # the stores' own package
        for table, _, _ in COPIED_TABLES:
            if await db.execute_fetchall(f"SELECT 1 FROM {table} LIMIT 1"):
                raise Conflict(
                    f"the target already holds data (table {table}); copy into an empty one"
                )
        for table, columns, _ in COPIED_TABLES:
            rows = tables[table]
            marks = ", ".join("?" * len(columns.split(",")))
            await db.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)
            report.rows[table] = len(rows)
        if isinstance(target, PostgresStore):
            await db.execute(_PG_NEXT_SEQ)
    # api_keys: id, owner, provider, label, secret (sealed), ...
    report.secrets = sum(1 for row in tables["api_keys"] if row[4])
    if isinstance(target, PostgresStore):
        await target.refresh_statistics()
    return report


async def applied_migrations(store: SqliteStore) -> list[tuple[str, str]]:
    """(name, when applied) of every migration the store's database has, in order."""
    async with store._read() as db:  # the stores' own package
        rows = await db.execute_fetchall("SELECT name, applied FROM _migrations ORDER BY name")
    return [(str(name), str(applied)) for name, applied in rows]
