"""Store administration: which migrations a database has (``tavernkit migrate``), and copying
everything one store holds into another, empty one: SQLite into PostgreSQL (``tavernkit
copy-data --to URL``) and back (``--from URL``).

Both stores have the same tables (the PostgreSQL migrations mirror SQLite's) and share their SQL
code, so the copy is row for row: ids, owners, names, timestamps, revisions, link and blob
order, message positions, swipe rows and their partial marks all arrive as they were, and
every reference (a profile's key id, a chat's character) still holds. The message counters
on each chat are not copied but recounted by the target's triggers as its messages arrive.
API key secrets are copied file to file, between the stores' private key folders, with the
secret their fingerprints are keyed with.

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
    # written in the order first stored, which is the order list_blobs gives
    ("record_blobs", "record_id, name, data", "rowid"),
    ("record_links", "from_id, rel, to_id, position", "from_id, rel, position"),
    ("settings", "owner, data, updated", "owner"),
    ("global_variables", "owner, name, value, updated", "owner, name"),
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
    # a chat's tree (015): its branches, then the messages parked off the current path
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
    """How many rows of each table were copied, and how many key secrets."""

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
    key_ids = [str(row[0]) for row in tables["api_keys"]]
    secrets = {key_id: source.key_files.read(key_id) for key_id in key_ids}
    report = CopyReport()
    written: list[str] = []
    try:
        async with target._write() as db:  # the stores' own package
            for table, _, _ in COPIED_TABLES:
                if await db.execute_fetchall(f"SELECT 1 FROM {table} LIMIT 1"):
                    raise Conflict(
                        f"the target already holds data (table {table}); copy into an empty one"
                    )
            # the secrets first: a key row without its secret would be a key that cannot be used
            files = target.key_files
            if secrets:  # the same install on another backend: its fingerprints stay as they are
                files.adopt_fingerprint_secret(source.key_files.fingerprint_secret())
            for key_id, secret in secrets.items():
                files.write(key_id, secret)
                written.append(key_id)
            for table, columns, _ in COPIED_TABLES:
                rows = tables[table]
                marks = ", ".join("?" * len(columns.split(",")))
                await db.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)
                report.rows[table] = len(rows)
            if isinstance(target, PostgresStore):
                await db.execute(_PG_NEXT_SEQ)
    except BaseException:
        for key_id in written:
            target.key_files.delete(key_id)
        raise
    report.secrets = len(written)
    if isinstance(target, PostgresStore):
        await target.refresh_statistics()
    return report


async def applied_migrations(store: SqliteStore) -> list[tuple[str, str]]:
    """(name, when applied) of every migration the store's database has, in order."""
    async with store._read() as db:  # the stores' own package
        rows = await db.execute_fetchall("SELECT name, applied FROM _migrations ORDER BY name")
    return [(str(name), str(applied)) for name, applied in rows]
