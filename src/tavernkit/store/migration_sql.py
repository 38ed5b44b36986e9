"""The schema's SQL, statement by statement, as the migrations of
:mod:`tavernkit.store.migrations` run it: the statements both backends run as they are (the
PostgreSQL mirror, :mod:`tavernkit.store.pg_migrations`, derives its own from them or takes
them whole), and where the two dialects part, each one's (``SQLITE_``/``PG_``).

Kept apart from the runner and the migration steps so each reads on its own: here is what the
schema is, there is the order it is reached in and the data each step moves. Like a migration,
a released statement list is never edited; a change of schema is a new list (and step).
"""

from __future__ import annotations

from tavernkit.store.storage_use import ENTRIES_SQLITE_STATEMENTS

__all__ = [
    "M001_STATEMENTS",
    "M005_STATEMENTS",
    "M008_STATEMENTS",
    "M010_STATEMENTS",
    "M011_STATEMENTS",
    "M012_STATEMENTS",
    "M013_STATEMENTS",
    "M015_STATEMENTS",
    "M016_STATEMENTS",
    "M016_TABLE",
    "M017_STATEMENTS",
    "PG_M013_STATEMENTS",
    "PG_M015_STATEMENTS",
    "SQLITE_M015_STATEMENTS",
]

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

#: the listing indexes (011), as plain SQL both backends run: one per order of
#: :meth:`~tavernkit.store.protocol.Store.list_page`, each holding a whole listing line
M011_STATEMENTS: tuple[str, ...] = (
    "CREATE INDEX records_listed_by_name ON records "
    "(owner, kind, lower(name), name, created, id, updated)",
    "CREATE INDEX records_listed_by_created ON records (owner, kind, created, id, name, updated)",
    "CREATE INDEX records_listed_by_updated ON records (owner, kind, updated, id, name, created)",
)

#: a chat's ``chat_metadata.integrity`` id in a column of its own, indexed (012), so an import
#: finds the stored chats with the file's id by the index, never by loading every chat
M012_STATEMENTS: tuple[str, ...] = (
    "ALTER TABLE chats ADD COLUMN integrity TEXT",
    "CREATE INDEX chats_by_integrity ON chats (owner, integrity)",
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
