"""Numbered, forward-only schema migrations for the SQLite store.

In the style of simonw/llm's migrations: an ordered list of functions, each applied once in its
own transaction and recorded by name in ``_migrations``, so opening a database twice changes
nothing and an old database catches up step by step. A migration is never edited once released;
a change of schema is a new function at the end. A database that names a migration this code
does not know was written by a newer tavernkit and is refused rather than guessed at.

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
from tavernkit.store.sqlite_thread import SqliteConnection
from tavernkit.store.storage_use import ENTRIES_SQLITE_STATEMENTS, PARKED_SQLITE_STATEMENTS
from tavernkit.store.storage_use import SQLITE_STATEMENTS as M009_STATEMENTS

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


#: the tables of ``001_initial`` (the PostgreSQL store's mirror derives its own from them)
M001_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE records (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        name_key TEXT,
        data TEXT NOT NULL,
        created TEXT NOT NULL,
        updated TEXT NOT NULL,
        UNIQUE (owner, kind, name_key)
    )""",
    "CREATE INDEX records_by_name ON records (owner, kind, name)",
    """CREATE TABLE record_blobs (
        record_id TEXT NOT NULL REFERENCES records (id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (record_id, name)
    )""",
    """CREATE TABLE record_links (
        from_id TEXT NOT NULL REFERENCES records (id) ON DELETE CASCADE,
        rel TEXT NOT NULL,
        to_id TEXT NOT NULL REFERENCES records (id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        PRIMARY KEY (from_id, rel, to_id)
    )""",
    "CREATE INDEX record_links_to ON record_links (to_id)",
    """CREATE TABLE settings (
        owner TEXT PRIMARY KEY,
        data TEXT NOT NULL,
        updated TEXT NOT NULL
    )""",
    """CREATE TABLE global_variables (
        owner TEXT NOT NULL,
        name TEXT NOT NULL,
        value TEXT NOT NULL,
        updated TEXT NOT NULL,
        PRIMARY KEY (owner, name)
    )""",
    """CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        provider TEXT NOT NULL,
        label TEXT NOT NULL,
        secret TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        created TEXT NOT NULL
    )""",
    "CREATE INDEX api_keys_by_owner ON api_keys (owner, provider)",
    """CREATE TABLE key_state (
        key_id TEXT PRIMARY KEY REFERENCES api_keys (id) ON DELETE CASCADE,
        cooldown_until TEXT,
        failures INTEGER NOT NULL DEFAULT 0,
        last_error_code TEXT,
        last_used TEXT,
        updated TEXT NOT NULL
    )""",
    """CREATE TABLE chats (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        character_id TEXT REFERENCES records (id) ON DELETE SET NULL,
        character_name TEXT,
        name TEXT NOT NULL,
        header TEXT NOT NULL,
        created TEXT NOT NULL,
        updated TEXT NOT NULL
    )""",
    "CREATE INDEX chats_by_owner ON chats (owner, character_id, updated)",
    "CREATE INDEX chats_by_name ON chats (owner, name)",
    """CREATE TABLE messages (
        id TEXT PRIMARY KEY,
        chat_id TEXT NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        body TEXT NOT NULL,
        extracted TEXT NOT NULL,
        mes TEXT,
        UNIQUE (chat_id, position)
    )""",
    """CREATE TABLE swipes (
        message_id TEXT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        text TEXT,
        info TEXT,
        partial INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (message_id, idx)
    )""",
)


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


#: the server's accounts (005), as plain SQL both backends run
M005_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE users (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            name_key TEXT NOT NULL UNIQUE,
            owner TEXT NOT NULL UNIQUE,
            password_hash TEXT NOT NULL,
            is_admin INTEGER NOT NULL DEFAULT 0,
            shared_fallback INTEGER NOT NULL DEFAULT 1,
            created TEXT NOT NULL
        )""",
    """CREATE TABLE api_tokens (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
            token_hash TEXT NOT NULL UNIQUE,
            label TEXT NOT NULL,
            created TEXT NOT NULL,
            last_used TEXT
        )""",
    "CREATE INDEX api_tokens_by_user ON api_tokens (user_id)",
    """CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
            session_hash TEXT NOT NULL UNIQUE,
            created TEXT NOT NULL,
            expires TEXT NOT NULL
        )""",
    "CREATE INDEX sessions_by_user ON sessions (user_id)",
)


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


#: the message search index (008): FTS5 over each message's shown text by trigrams (see
#: tavernkit.store._sqlite_search), external content keyed by the message's rowid (SQLite's
#: VACUUM only promises to keep an INTEGER PRIMARY KEY, but copies rows with their rowids, as
#: checked on 3.40; ``INSERT INTO message_search (message_search) VALUES ('rebuild')`` makes
#: the index again from the rows if ever needed). Triggers keep it, so every path that
#: writes a message's text (append, edit, swipe, streaming, truncation, a chat's cascade
#: delete) keeps the index without a line of its own; an UPDATE that leaves ``mes`` as it was
#: (a message saved for its flags or swipes) does not touch it.
M008_STATEMENTS: tuple[str, ...] = (
    "CREATE VIRTUAL TABLE message_search USING fts5(mes, content = 'messages', "
    "content_rowid = 'rowid', tokenize = 'trigram', columnsize = 0)",
    # the messages stored before: the index reads them from ``messages`` itself
    "INSERT INTO message_search (message_search) VALUES ('rebuild')",
    "CREATE TRIGGER messages_search_in AFTER INSERT ON messages WHEN NEW.mes IS NOT NULL "
    "BEGIN INSERT INTO message_search (rowid, mes) VALUES (NEW.rowid, NEW.mes); END",
    # an external-content index forgets a text when told what it was
    "CREATE TRIGGER messages_search_out AFTER DELETE ON messages WHEN OLD.mes IS NOT NULL "
    "BEGIN INSERT INTO message_search (message_search, rowid, mes) "
    "VALUES ('delete', OLD.rowid, OLD.mes); END",
    "CREATE TRIGGER messages_search_edit AFTER UPDATE OF mes ON messages "
    "WHEN OLD.mes IS NOT NEW.mes BEGIN "
    "INSERT INTO message_search (message_search, rowid, mes) "
    "SELECT 'delete', OLD.rowid, OLD.mes WHERE OLD.mes IS NOT NULL; "
    "INSERT INTO message_search (rowid, mes) SELECT NEW.rowid, NEW.mes "
    "WHERE NEW.mes IS NOT NULL; END",
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


#: a key's rest per model (010), as plain SQL both backends run
M010_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE key_rests (
            key_id TEXT NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
            model TEXT NOT NULL,
            cooldown_until TEXT,
            failures INTEGER NOT NULL DEFAULT 0,
            last_error_code TEXT,
            last_used TEXT,
            updated TEXT NOT NULL,
            PRIMARY KEY (key_id, model)
        )""",
)


async def _m010_key_rests(db: SqliteConnection) -> None:
    # A key that fails rests for the model that failed (a key resting for model A still
    # serves model B); key_state keeps the key's own use count, whatever the model.
    await _run(db, list(M010_STATEMENTS))


#: the listing indexes (011), as plain SQL both backends run: one per order of
#: :meth:`~tavernkit.store.protocol.Store.list_page`, each holding a whole listing line
M011_STATEMENTS: tuple[str, ...] = (
    "CREATE INDEX records_listed_by_name ON records "
    "(owner, kind, lower(name), name, created, id, updated)",
    "CREATE INDEX records_listed_by_created ON records (owner, kind, created, id, name, updated)",
    "CREATE INDEX records_listed_by_updated ON records (owner, kind, updated, id, name, created)",
)


async def _m011_listing_indexes(db: SqliteConnection) -> None:
    # A page of a listing (the character grid at 8,000 cards) is read from an index that holds
    # its lines, in its order: never every record's row, whose data is a whole card.
    await _run(db, M011_STATEMENTS)


#: a chat's ``chat_metadata.integrity`` id in a column of its own, indexed (012), so an import
#: finds the stored chats with the file's id by the index, never by loading every chat
M012_STATEMENTS: tuple[str, ...] = (
    "ALTER TABLE chats ADD COLUMN integrity TEXT",
    "CREATE INDEX chats_by_integrity ON chats (owner, integrity)",
)


async def _m012_chat_integrity(db: SqliteConnection) -> None:
    await _run(db, M012_STATEMENTS)
    await db.execute(
        "UPDATE chats SET integrity = json_extract(header, '$.chat_metadata.integrity') "
        "WHERE json_valid(header) "
        "AND json_type(header, '$.chat_metadata.integrity') = 'text'"
    )


#: how many records each owner has of each kind (013), kept by triggers: the total of a page of
#: a listing is one row, never a count of the listing (the character grid's "1-50 of 8,000")
M013_TABLE = (
    "CREATE TABLE record_counts (owner TEXT NOT NULL, kind TEXT NOT NULL, "
    "n BIGINT NOT NULL, PRIMARY KEY (owner, kind))"
)
M013_FILL = (
    "INSERT INTO record_counts (owner, kind, n) "
    "SELECT owner, kind, count(*) FROM records GROUP BY owner, kind"
)
_COUNT_IN = (
    "INSERT INTO record_counts (owner, kind, n) VALUES (NEW.owner, NEW.kind, 1) "
    "ON CONFLICT (owner, kind) DO UPDATE SET n = record_counts.n + 1"
)
_COUNT_OUT = "UPDATE record_counts SET n = n - 1 WHERE owner = OLD.owner AND kind = OLD.kind"
M013_STATEMENTS: tuple[str, ...] = (
    M013_TABLE,
    f"CREATE TRIGGER records_counted_in AFTER INSERT ON records BEGIN {_COUNT_IN}; END",
    f"CREATE TRIGGER records_counted_out AFTER DELETE ON records BEGIN {_COUNT_OUT}; END",
    "CREATE TRIGGER records_recounted AFTER UPDATE OF owner, kind ON records "
    f"BEGIN {_COUNT_OUT}; {_COUNT_IN}; END",
    M013_FILL,
)
#: PostgreSQL's: one plpgsql function behind a row trigger
PG_M013_STATEMENTS: tuple[str, ...] = (
    M013_TABLE,
    f"""CREATE FUNCTION tk_count_records() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('DELETE', 'UPDATE') THEN {_COUNT_OUT}; END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN {_COUNT_IN}; END IF;
        RETURN NULL;
    END $$""",
    "CREATE TRIGGER records_counted AFTER INSERT OR DELETE OR UPDATE OF owner, kind "
    "ON records FOR EACH ROW EXECUTE FUNCTION tk_count_records()",
    M013_FILL,
)


async def _m013_record_counts(db: SqliteConnection) -> None:
    await _run(db, M013_STATEMENTS)


async def _m014_character_facets(db: SqliteConnection) -> None:
    await _run(db, M014_STATEMENTS)


#: sealed key secrets (015): API key secrets move back into ``api_keys.secret``, sealed with
#: the secret key (tavernkit.store.secret_key; the stores move any key files in on open, where
#: the key is known, not here), and ``store_secrets`` holds the store's own sealed secrets (the
#: fingerprint secret). ``secret`` holds a sealed secret or nothing, never a plaintext: the
#: triggers refuse anything else (PostgreSQL: a CHECK).
M015_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE store_secrets (
        name TEXT PRIMARY KEY,
        sealed TEXT NOT NULL
    )""",
)
_SEALED_ONLY = "NEW.secret <> '' AND substr(NEW.secret, 1, 4) <> 'tk1:'"
SQLITE_M015_STATEMENTS: tuple[str, ...] = (
    *M015_STATEMENTS,
    f"CREATE TRIGGER api_keys_sealed_in BEFORE INSERT ON api_keys WHEN {_SEALED_ONLY} "
    "BEGIN SELECT RAISE(ABORT, 'api_keys.secret holds sealed secrets only'); END",
    f"CREATE TRIGGER api_keys_sealed_edit BEFORE UPDATE OF secret ON api_keys WHEN {_SEALED_ONLY} "
    "BEGIN SELECT RAISE(ABORT, 'api_keys.secret holds sealed secrets only'); END",
)
PG_M015_STATEMENTS: tuple[str, ...] = (
    *M015_STATEMENTS,
    "ALTER TABLE api_keys DROP CONSTRAINT api_keys_no_secret",
    "ALTER TABLE api_keys ADD CONSTRAINT api_keys_sealed_secret "
    "CHECK (secret = '' OR substr(secret, 1, 4) = 'tk1:')",
)


async def _m015_sealed_key_secrets(db: SqliteConnection) -> None:
    await _run(db, SQLITE_M015_STATEMENTS)


#: a lorebook's entries, a row each (016), in the book's order (``seq``)
M016_TABLE: tuple[str, ...] = (
    "CREATE TABLE lorebook_entries (record_id TEXT NOT NULL REFERENCES records (id) "
    "ON DELETE CASCADE, uid TEXT NOT NULL, seq BIGINT NOT NULL, data TEXT NOT NULL, "
    "PRIMARY KEY (record_id, uid))",
    "CREATE INDEX lorebook_entries_in_order ON lorebook_entries (record_id, seq)",
)
#: the books stored before it: their entries move to rows (json_each walks an object in its
#: order; its ``id`` grows along it), then each book keeps ``"entries": {}`` in their place
M016_STATEMENTS: tuple[str, ...] = (
    *M016_TABLE,
    *ENTRIES_SQLITE_STATEMENTS,
    "INSERT INTO lorebook_entries (record_id, uid, seq, data) "
    "SELECT r.id, j.key, j.id, json_quote(j.value) "
    "FROM records r, json_each(r.data, '$.entries') j "
    "WHERE r.kind = 'lorebook' AND json_type(r.data, '$.entries') = 'object'",
    "UPDATE records SET data = json_set(data, '$.entries', json('{}')) "
    "WHERE kind = 'lorebook' AND json_type(data, '$.entries') = 'object'",
)


async def _m016_lorebook_entries(db: SqliteConnection) -> None:
    await _run(db, M016_STATEMENTS)


#: a chat as a tree (017, :mod:`tavernkit.store.chat_tree`): its branches (ids per chat, the
#: root ``main``; a chat that never branched has none) and the messages of the paths not shown,
#: each under the branch that owns it at its position, as its JSON; the current path stays in
#: ``messages``, so no read of a chat changes
M017_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE chat_branches (
        chat_id TEXT NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
        id TEXT NOT NULL,
        parent TEXT,
        fork INTEGER NOT NULL,
        current INTEGER NOT NULL DEFAULT 0,
        created TEXT NOT NULL,
        PRIMARY KEY (chat_id, id)
    )""",
    """CREATE TABLE branch_messages (
        chat_id TEXT NOT NULL,
        branch_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        message_id TEXT NOT NULL,
        data TEXT NOT NULL,
        partial TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (chat_id, branch_id, position),
        FOREIGN KEY (chat_id, branch_id) REFERENCES chat_branches (chat_id, id) ON DELETE CASCADE
    )""",
)


async def _m017_chat_tree(db: SqliteConnection) -> None:
    await _run(db, (*M017_STATEMENTS, *PARKED_SQLITE_STATEMENTS))


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
