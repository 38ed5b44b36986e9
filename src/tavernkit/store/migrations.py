"""Numbered, forward-only schema migrations for the SQLite store.

In the style of simonw/llm's migrations: an ordered list of functions, each applied once in its
own transaction and recorded by name in ``_migrations``, so opening a database twice changes
nothing and an old database catches up step by step. A migration is never edited once released;
a change of schema is a new function at the end. A database that names a migration this code
does not know was written by a newer tavernkit and is refused rather than guessed at. The
statements the steps run, shared with the PostgreSQL mirror: :mod:`tavernkit.store.migration_sql`.

Schema notes:

- ``records`` holds every document kind as JSON. ``name_key`` is the name for kinds whose names
  are unique and NULL otherwise, so one UNIQUE constraint covers both (NULLs never collide, in
  SQLite as in PostgreSQL).
- ``message_search`` (008) is an FTS5 index of ``messages.mes`` by trigrams (external
  content: it keeps the index, not a copy of the text), kept by triggers on ``messages``; an
  SQLite without the trigram tokenizer (older than 3.34) gets no index and searches scan.
- ``messages.body`` is a message's JSON with ``mes``/``swipes``/``swipe_info`` left as
  placeholders (to keep the key order) when they live in their own columns/rows:
  ``messages.mes`` and one ``swipes`` row per swipe. Appending or streaming a swipe then
  touches one small row, never the chat.
- ``lorebook_entries`` (016) holds a lorebook's entries, one row each (``seq`` keeps their
  order); the book's ``records.data`` keeps the rest, with ``"entries": {}`` in its place. An
  edit of one entry writes its row (a 20,000-entry book is a 36 MB record); a read of the
  whole book puts the rows back in place (:mod:`tavernkit.store._sqlite_members`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from tavernkit.errors import StoreError
from tavernkit.store._message_rows import message_flags
from tavernkit.store.facets_sql import M014_STATEMENTS
from tavernkit.store.key_files import KeyFiles, key_dir_for
from tavernkit.store.migration_sql import (
    M001_STATEMENTS,
    M005_STATEMENTS,
    M008_STATEMENTS,
    M010_STATEMENTS,
    M011_STATEMENTS,
    M012_STATEMENTS,
    M013_STATEMENTS,
    M016_STATEMENTS,
    M016_TABLE,
    M017_STATEMENTS,
    PG_M013_STATEMENTS,
    PG_M015_STATEMENTS,
    SQLITE_M015_STATEMENTS,
)
from tavernkit.store.sqlite_thread import SqliteConnection
from tavernkit.store.storage_use import PARKED_SQLITE_STATEMENTS
from tavernkit.store.storage_use import SQLITE_STATEMENTS as M009_STATEMENTS

#: the statement lists are :mod:`tavernkit.store.migration_sql`'s; the ones named here are
#: still importable from this module, where they used to live
__all__ = [
    "M001_STATEMENTS",
    "M011_STATEMENTS",
    "M012_STATEMENTS",
    "M016_TABLE",
    "M017_STATEMENTS",
    "MIGRATIONS",
    "PG_M013_STATEMENTS",
    "PG_M015_STATEMENTS",
    "Migration",
    "apply_migrations",
]

Migration = Callable[[SqliteConnection], Awaitable[None]]


async def _run(db: SqliteConnection, statements: Sequence[str]) -> None:
    # executescript would COMMIT the migration's transaction half-way; run them one by one.
    for sql in statements:
        await db.execute(sql)


async def _m001_initial(db: SqliteConnection) -> None:
    await _run(db, M001_STATEMENTS)


async def _m002_key_uses(db: SqliteConnection) -> None:
    # The key pool picks the least-used key first; without a persisted counter every process
    # restart (or every CLI call) would start all keys at zero and always pick the first one.
    await db.execute("ALTER TABLE key_state ADD COLUMN uses INTEGER NOT NULL DEFAULT 0")


async def _m003_keys_out_of_db(db: SqliteConnection) -> None:
    # API key secrets move to private files beside the database (tavernkit.store.key_files):
    # a database file is what gets copied and shared; it keeps the rows, not the secrets.

    async with db.execute("PRAGMA database_list") as cur:
        main = next((row[2] for row in await cur.fetchall() if row[1] == "main"), "")
    async with db.execute("SELECT id, secret FROM api_keys WHERE secret != ''") as cur:
        rows = [(str(r[0]), str(r[1])) for r in await cur.fetchall()]
    if not rows:
        return
    if not main:
        raise StoreError("an in-memory database cannot keep API keys apart from it")
    files = KeyFiles(key_dir_for(main))
    for key_id, secret in rows:
        files.write(key_id, secret)  # idempotent: a failed migration rewrites the same files
    # overwrite the freed bytes, so the old secrets do not linger in the file's free space
    await db.execute("PRAGMA secure_delete = ON")
    try:
        await db.execute("UPDATE api_keys SET secret = '' WHERE secret != ''")
    finally:
        await db.execute("PRAGMA secure_delete = OFF")


def _count_change(sign: str, row: str) -> str:
    """SET clause adding (``+``) or removing (``-``) message ``row`` from its chat's counts."""
    return (
        f"msg_total = msg_total {sign} 1, "
        f"msg_hidden = msg_hidden {sign} ({row}.flags & 1), "
        f"msg_user = msg_user {sign} (({row}.flags & 2) >> 1), "
        f"msg_hidden_tools = msg_hidden_tools {sign} (({row}.flags & 5) = 5)"
    )


async def _m004_turn_path(db: SqliteConnection) -> None:
    # A turn loads the chat's tail, not the chat: the messages it leaves out are counted, by
    # their flags (hidden, user, tool calls; see _message_rows.message_flags), in counters on
    # the chat's row that triggers keep, so no read walks the chat's messages to count them.
    # Records get a revision that every write bumps, so a process can keep what it made of a
    # record (a validated lorebook, its compiled entries) until the record changes.
    await db.execute("ALTER TABLE messages ADD COLUMN flags INTEGER NOT NULL DEFAULT 0")
    async with db.execute("SELECT id, body FROM messages") as cur:
        rows = [(message_flags(json.loads(body)), mid) async for mid, body in cur]
    await db.executemany("UPDATE messages SET flags = ? WHERE id = ?", rows)
    for column in ("msg_total", "msg_hidden", "msg_user", "msg_hidden_tools"):
        await db.execute(f"ALTER TABLE chats ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0")
    await db.execute(
        "UPDATE chats SET "
        "msg_total = (SELECT COUNT(*) FROM messages m WHERE m.chat_id = chats.id), "
        "msg_hidden = (SELECT COUNT(*) FROM messages m WHERE m.chat_id = chats.id "
        "AND m.flags & 1), "
        "msg_user = (SELECT COUNT(*) FROM messages m WHERE m.chat_id = chats.id "
        "AND m.flags & 2), "
        "msg_hidden_tools = (SELECT COUNT(*) FROM messages m WHERE m.chat_id = chats.id "
        "AND m.flags & 5 = 5)"
    )
    await _run(
        db,
        [
            "CREATE TRIGGER messages_counted_in AFTER INSERT ON messages BEGIN "
            f"UPDATE chats SET {_count_change('+', 'NEW')} WHERE id = NEW.chat_id; END",
            "CREATE TRIGGER messages_counted_out AFTER DELETE ON messages BEGIN "
            f"UPDATE chats SET {_count_change('-', 'OLD')} WHERE id = OLD.chat_id; END",
            "CREATE TRIGGER messages_recounted AFTER UPDATE OF flags, chat_id ON messages "
            "WHEN OLD.flags != NEW.flags OR OLD.chat_id != NEW.chat_id BEGIN "
            f"UPDATE chats SET {_count_change('-', 'OLD')} WHERE id = OLD.chat_id; "
            f"UPDATE chats SET {_count_change('+', 'NEW')} WHERE id = NEW.chat_id; END",
        ],
    )
    await db.execute("ALTER TABLE records ADD COLUMN revision INTEGER NOT NULL DEFAULT 1")


async def _m005_accounts(db: SqliteConnection) -> None:
    # The server's accounts. Names are unique whatever their case (name_key is the casefolded
    # name); tokens and sessions are kept as SHA-256 hashes only, and go with their user.
    # shared_fallback: the user lets their turns fall back to the server's shared route.
    await _run(db, list(M005_STATEMENTS))


async def _m007_memory_vectors(db: SqliteConnection) -> None:
    # Memory's vectors (chat memory, vectorized lorebook entries): float32 blobs searched with
    # numpy (sqlite-vec cannot load here). One row per item; ``seq`` (the rowid: always past
    # the largest, so no sqlite_sequence table is needed) keeps insertion order,
    # which breaks score ties as SillyTavern's index does; ``space`` is the embedder's name; a
    # chat's collection is ``chat:<chat id>`` (``chat.memory_setup.chat_collection``).
    await _run(
        db,
        [
            """CREATE TABLE memory_vectors (
                seq INTEGER PRIMARY KEY,
                owner TEXT NOT NULL,
                collection TEXT NOT NULL,
                space TEXT NOT NULL,
                hash INTEGER NOT NULL,
                label INTEGER NOT NULL,
                text TEXT NOT NULL,
                vector BLOB NOT NULL
            )""",
            "CREATE INDEX memory_vectors_by_hash ON memory_vectors "
            "(owner, collection, space, hash)",
            # a deleted chat takes its collection with it (SillyTavern purges it too)
            "CREATE TRIGGER chats_vectors_purged AFTER DELETE ON chats BEGIN "
            "DELETE FROM memory_vectors WHERE owner = OLD.owner "
            "AND collection = 'chat:' || OLD.id; END",
        ],
    )


async def _has_trigram(db: SqliteConnection) -> bool:
    """Whether this SQLite has FTS5 with the trigram tokenizer (3.34 and later, built with
    FTS5, as Python's own builds are)."""
    try:
        await db.execute(
            "CREATE VIRTUAL TABLE temp.tk_trigram_probe USING fts5(x, tokenize = 'trigram')"
        )
    except sqlite3.OperationalError:
        return False
    await db.execute("DROP TABLE temp.tk_trigram_probe")
    return True


async def _m008_message_search(db: SqliteConnection) -> None:
    # The search inside chats' messages. Without the trigram tokenizer the database gets no
    # index (searches then read the text of each message in scope) rather than no store.
    if await _has_trigram(db):
        await _run(db, M008_STATEMENTS)


async def _m009_storage_use(db: SqliteConnection) -> None:
    # The bytes each owner stores, kept by triggers, for the server's per-user quota (see
    # tavernkit.store.storage_use): reading a user's use is one row, never a scan.
    await _run(db, M009_STATEMENTS)


async def _m010_key_rests(db: SqliteConnection) -> None:
    # A key that fails rests for the model that failed (a key resting for model A still
    # serves model B); key_state keeps the key's own use count, whatever the model.
    await _run(db, list(M010_STATEMENTS))


async def _m011_listing_indexes(db: SqliteConnection) -> None:
    # A page of a listing (the character grid at 8,000 cards) is read from an index that holds
    # its lines, in its order: never every record's row, whose data is a whole card.
    await _run(db, M011_STATEMENTS)


async def _m012_chat_integrity(db: SqliteConnection) -> None:
    await _run(db, M012_STATEMENTS)
    await db.execute(
        "UPDATE chats SET integrity = json_extract(header, '$.chat_metadata.integrity') "
        "WHERE json_valid(header) "
        "AND json_type(header, '$.chat_metadata.integrity') = 'text'"
    )


async def _m013_record_counts(db: SqliteConnection) -> None:
    await _run(db, M013_STATEMENTS)


async def _m014_character_facets(db: SqliteConnection) -> None:
    await _run(db, M014_STATEMENTS)


async def _m015_sealed_key_secrets(db: SqliteConnection) -> None:
    await _run(db, SQLITE_M015_STATEMENTS)


async def _m016_lorebook_entries(db: SqliteConnection) -> None:
    await _run(db, M016_STATEMENTS)


async def _m017_chat_tree(db: SqliteConnection) -> None:
    await _run(db, (*M017_STATEMENTS, *PARKED_SQLITE_STATEMENTS))


async def _m018_row_change_triggers(db: SqliteConnection) -> None:
    """Nothing for SQLite: its triggers are row triggers on the columns that count already
    (PostgreSQL's 018 makes two of its statement triggers such)."""


#: Applied in this order, each once. Append only.
MIGRATIONS: tuple[tuple[str, Migration], ...] = (
    ("001_initial", _m001_initial),
    ("002_key_uses", _m002_key_uses),
    ("003_keys_out_of_db", _m003_keys_out_of_db),
    ("004_turn_path", _m004_turn_path),
    ("005_accounts", _m005_accounts),
    ("007_memory_vectors", _m007_memory_vectors),
    ("008_message_search", _m008_message_search),
    ("009_storage_use", _m009_storage_use),
    ("010_key_rests", _m010_key_rests),
    ("011_listing_indexes", _m011_listing_indexes),
    ("012_chat_integrity", _m012_chat_integrity),
    ("013_record_counts", _m013_record_counts),
    ("014_character_facets", _m014_character_facets),
    ("015_sealed_key_secrets", _m015_sealed_key_secrets),
    ("016_lorebook_entries", _m016_lorebook_entries),
    ("017_chat_tree", _m017_chat_tree),
    ("018_row_change_triggers", _m018_row_change_triggers),
)


async def apply_migrations(
    db: SqliteConnection,
    *,
    now: Callable[[], datetime],
    migrations: Sequence[tuple[str, Migration]] = MIGRATIONS,
) -> list[str]:
    """Apply the migrations ``db`` lacks (``db`` in autocommit mode); returns their names."""
    try:
        await db.execute(
            "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied TEXT NOT NULL)"
        )
        async with db.execute("SELECT name FROM _migrations") as cur:
            done = {str(row[0]) for row in await cur.fetchall()}
        known = {name for name, _ in migrations}
        unknown = sorted(done - known)
        if unknown:
            raise StoreError(
                f"database has migrations this version does not know ({', '.join(unknown)}); "
                "it was written by a newer tavernkit"
            )
        applied: list[str] = []
        for name, fn in migrations:
            if name in done:
                continue
            await db.execute("BEGIN IMMEDIATE")
            try:
                await fn(db)
                await db.execute(
                    "INSERT INTO _migrations (name, applied) VALUES (?, ?)",
                    (name, now().isoformat()),
                )
            except BaseException:
                await db.execute("ROLLBACK")
                raise
            await db.execute("COMMIT")
            applied.append(name)
        return applied
    except sqlite3.Error as exc:
        raise StoreError(f"cannot migrate the database: {exc}") from exc
