"""How many bytes each owner stores: the ``storage_use`` table (migration ``009_storage_use``)
and the triggers that keep it, for the server's per-user quota.

One row per owner (``owner``, ``bytes``), so reading a user's use is one primary-key lookup,
never a scan of their data. Triggers on every table that holds an owner's content add what a
row adds and take away what it takes away, so every path that writes (imports, turns and their
streamed swipes, edits, cascades) is counted without a line of its own:

- a row's size is the byte length of its content columns (UTF-8 text, blobs; see
  :data:`SIZED`): records, their blobs (avatars, CHARX assets), lorebook entries (016),
  chats, messages, swipes, memory vectors, global variables and settings;
- a row whose owner is its parent's (a blob's record, a message's chat, a swipe's message's
  chat) is counted for that owner while the parent exists;
- deleting a parent (a record, a chat, a message) takes away its whole subtree *before* the
  row goes (a BEFORE DELETE trigger sums the children still there), and the children the
  cascade then deletes find no parent and count nothing: in SQLite and in PostgreSQL the
  parent row is gone before its cascade runs.

SQLite runs row triggers; PostgreSQL runs statement triggers over transition tables for
inserts and updates (an import's one COPY of 100,000 messages updates the owner's row once)
and row triggers before a parent's delete (they must see the children). Both measure the
same bytes (``length(CAST(x AS BLOB))`` and ``octet_length(x)``), so a store copied from one to
the other counts the same.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ENTRIES_PG_STATEMENTS",
    "ENTRIES_SQLITE_STATEMENTS",
    "PARKED_PG_STATEMENTS",
    "PARKED_SQLITE_STATEMENTS",
    "PG_STATEMENTS",
    "ROW_EDIT_PG_STATEMENTS",
    "SIZED",
    "SQLITE_STATEMENTS",
    "recount_sql",
]


@dataclass(frozen=True, slots=True)
class _Table:
    name: str
    #: the columns whose bytes count
    columns: tuple[str, ...]
    #: the owner of row ``{r}``: a column, or a lookup through its parents
    owner: str
    #: whether its rows have children (a delete takes them with it)
    parent: bool = False


def _size(table: str, row: str, dialect: str) -> str:
    columns = SIZED[table].columns
    if dialect == "sqlite":
        parts = [f"coalesce(length(CAST({row}.{c} AS BLOB)), 0)" for c in columns]
    else:
        parts = [f"coalesce(octet_length({row}.{c}), 0)" for c in columns]
    return "(" + " + ".join(parts) + ")"


def _sum(table: str, alias: str, where: str, dialect: str, join: str = "") -> str:
    return (
        f"(SELECT coalesce(sum({_size(table, alias, dialect)}), 0) FROM {table} {alias}"
        f"{join} WHERE {where})"
    )


def _subtree(table: str, row: str, dialect: str) -> str:
    if table == "records":
        return _sum("record_blobs", "b", f"b.record_id = {row}.id", dialect)
    if table == "messages":
        return _sum("swipes", "s", f"s.message_id = {row}.id", dialect)
    if table == "chats":
        messages = _sum("messages", "m", f"m.chat_id = {row}.id", dialect)
        swipes = _sum(
            "swipes",
            "s",
            f"m.chat_id = {row}.id",
            dialect,
            " JOIN messages m ON m.id = s.message_id",
        )
        return f"({messages} + {swipes})"
    return "0"


#: table -> what counts of its rows, and whose: the tables of migration 009
_SIZED_009: dict[str, _Table] = {
    t.name: t
    for t in (
        _Table("records", ("name", "data"), "{r}.owner", parent=True),
        _Table(
            "record_blobs", ("name", "data"), "(SELECT owner FROM records WHERE id = {r}.record_id)"
        ),
        _Table("chats", ("name", "header"), "{r}.owner", parent=True),
        _Table(
            "messages",
            ("body", "extracted", "mes"),
            "(SELECT owner FROM chats WHERE id = {r}.chat_id)",
            parent=True,
        ),
        _Table(
            "swipes",
            ("text", "info"),
            "(SELECT c.owner FROM messages m JOIN chats c ON c.id = m.chat_id "
            "WHERE m.id = {r}.message_id)",
        ),
        _Table("memory_vectors", ("text", "vector"), "{r}.owner"),
        _Table("global_variables", ("name", "value"), "{r}.owner"),
        _Table("settings", ("data",), "{r}.owner"),
    )
}

#: a lorebook's entries, one row each (migration 016): a record's children, like its blobs
_ENTRIES = _Table(
    "lorebook_entries", ("uid", "data"), "(SELECT owner FROM records WHERE id = {r}.record_id)"
)

#: every table whose rows count, and whose
SIZED: dict[str, _Table] = {**_SIZED_009, _ENTRIES.name: _ENTRIES}

_TABLE = "CREATE TABLE storage_use (owner TEXT PRIMARY KEY, bytes BIGINT NOT NULL DEFAULT 0)"
_ADD = "ON CONFLICT (owner) DO UPDATE SET bytes = storage_use.bytes + excluded.bytes"


def recount_sql(dialect: str, tables: dict[str, _Table] | None = None) -> str:
    """(owner, bytes) of every owner, counted from the data itself (a full scan: what the
    migration fills the table with, and what tests check the triggers against); ``tables``:
    those counted (default: all of :data:`SIZED`)."""
    rows = " UNION ALL ".join(
        f"SELECT {t.owner.format(r='x')} AS o, {_size(t.name, 'x', dialect)} AS d FROM {t.name} x"
        for t in (SIZED if tables is None else tables).values()
    )
    return f"SELECT o, sum(d) FROM ({rows}) z WHERE o IS NOT NULL GROUP BY o HAVING sum(d) <> 0"


def _fill(dialect: str, tables: dict[str, _Table]) -> str:
    return f"INSERT INTO storage_use (owner, bytes) {recount_sql(dialect, tables)}"


def _sqlite_add(owner: str, delta: str) -> str:
    return (
        f"INSERT INTO storage_use (owner, bytes) SELECT o, d FROM (SELECT {owner} AS o, "
        f"{delta} AS d) WHERE o IS NOT NULL AND d <> 0 {_ADD};"
    )


def _sqlite_triggers(t: _Table) -> list[str]:
    columns = ", ".join(t.columns)
    new, old = t.owner.format(r="NEW"), t.owner.format(r="OLD")
    change = f"{_size(t.name, 'NEW', 'sqlite')} - {_size(t.name, 'OLD', 'sqlite')}"
    gone = _size(t.name, "OLD", "sqlite")
    if t.parent:
        gone = f"({gone} + {_subtree(t.name, 'OLD', 'sqlite')})"
    return [
        f"CREATE TRIGGER {t.name}_use_in AFTER INSERT ON {t.name} BEGIN "
        f"{_sqlite_add(new, _size(t.name, 'NEW', 'sqlite'))} END",
        f"CREATE TRIGGER {t.name}_use_edit AFTER UPDATE OF {columns} ON {t.name} BEGIN "
        f"{_sqlite_add(new, change)} END",
        # before the row goes: its subtree is still there to be summed
        f"CREATE TRIGGER {t.name}_use_out BEFORE DELETE ON {t.name} BEGIN "
        f"{_sqlite_add(old, '-' + gone)} END",
    ]


def _pg_add(rows: str) -> str:
    return (
        f"INSERT INTO storage_use (owner, bytes) SELECT o, sum(d) FROM ({rows}) z "
        f"WHERE o IS NOT NULL GROUP BY o HAVING sum(d) <> 0 {_ADD}"
    )


def _pg_triggers(t: _Table) -> list[str]:
    def rows(table: str, sign: str) -> str:
        return (
            f"SELECT {t.owner.format(r='x')} AS o, {sign}{_size(t.name, 'x', 'pg')} AS d "
            f"FROM {table} x"
        )

    new_rows, old_rows = rows("new_rows", ""), rows("old_rows", "-")
    out = [
        f"""CREATE FUNCTION tk_use_{t.name}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                {_pg_add(new_rows)};
            ELSIF TG_OP = 'DELETE' THEN
                {_pg_add(old_rows)};
            ELSE
                {_pg_add(new_rows + " UNION ALL " + old_rows)};
            END IF;
            RETURN NULL;
        END $$""",
        f"CREATE TRIGGER {t.name}_use_in AFTER INSERT ON {t.name} REFERENCING NEW TABLE AS "
        f"new_rows FOR EACH STATEMENT EXECUTE FUNCTION tk_use_{t.name}()",
        f"CREATE TRIGGER {t.name}_use_edit AFTER UPDATE ON {t.name} REFERENCING OLD TABLE AS "
        f"old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tk_use_{t.name}()",
    ]
    if not t.parent:
        out.append(
            f"CREATE TRIGGER {t.name}_use_out AFTER DELETE ON {t.name} REFERENCING OLD TABLE "
            f"AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION tk_use_{t.name}()"
        )
        return out
    # a parent: a row trigger before the delete, while its children are there to be summed
    gone = f"({_size(t.name, 'OLD', 'pg')} + {_subtree(t.name, 'OLD', 'pg')})"
    out += [
        f"""CREATE FUNCTION tk_use_{t.name}_out() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE who TEXT;
        BEGIN
            who := {t.owner.format(r="OLD")};
            IF who IS NOT NULL THEN
                INSERT INTO storage_use (owner, bytes) VALUES (who, -{gone}) {_ADD};
            END IF;
            RETURN OLD;
        END $$""",
        f"CREATE TRIGGER {t.name}_use_out BEFORE DELETE ON {t.name} FOR EACH ROW "
        f"EXECUTE FUNCTION tk_use_{t.name}_out()",
    ]
    return out


#: migration 009 for SQLite: the table, what is stored already, the triggers
SQLITE_STATEMENTS: tuple[str, ...] = (
    _TABLE.replace("BIGINT", "INTEGER"),
    _fill("sqlite", _SIZED_009),
    *(sql for t in _SIZED_009.values() for sql in _sqlite_triggers(t)),
)

#: migration 009 for PostgreSQL
PG_STATEMENTS: tuple[str, ...] = (
    _TABLE,
    _fill("pg", _SIZED_009),
    *(sql for t in _SIZED_009.values() for sql in _pg_triggers(t)),
)

# A record's delete takes its entries with it: what they held goes from its owner before the
# record does (the cascade's own deletes find no record, and count nothing).
_ENTRIES_GONE = (
    "(SELECT coalesce(sum({size}), 0) FROM lorebook_entries e WHERE e.record_id = OLD.id)"
)

#: migration 016's triggers for SQLite (the entries' rows, and a record's delete)
ENTRIES_SQLITE_STATEMENTS: tuple[str, ...] = (
    *_sqlite_triggers(_ENTRIES),
    "CREATE TRIGGER records_entries_use_out BEFORE DELETE ON records BEGIN "
    + _sqlite_add("OLD.owner", "-" + _ENTRIES_GONE.format(size=_size(_ENTRIES.name, "e", "sqlite")))
    + " END",
)

#: migration 016's for PostgreSQL
ENTRIES_PG_STATEMENTS: tuple[str, ...] = (
    *_pg_triggers(_ENTRIES),
    f"""CREATE FUNCTION tk_use_records_entries_out() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE gone BIGINT;
        BEGIN
            gone := {_ENTRIES_GONE.format(size=_size(_ENTRIES.name, "e", "pg"))};
            IF gone <> 0 THEN
                INSERT INTO storage_use (owner, bytes) VALUES (OLD.owner, -gone) {_ADD};
            END IF;
            RETURN OLD;
        END $$""",
    "CREATE TRIGGER records_entries_use_out BEFORE DELETE ON records FOR EACH ROW "
    "EXECUTE FUNCTION tk_use_records_entries_out()",
)


# The messages parked off a chat's current path (``branch_messages``, migration 017) count for
# the chat's owner as its messages do: a row adds its JSON's bytes, a row that goes (a switch
# of path, a cut, a branch deleted) takes them away, and a chat's delete takes away its parked
# rows before the cascade (which then finds no chat). Row triggers in both databases: a switch
# moves one path's tail, not a whole import. (Not in :data:`SIZED`, whose triggers migration
# 009 makes before the table exists.)
_PARKED = "coalesce(length(CAST({r}.data AS BLOB)), 0)"
_PARKED_OWNER = "(SELECT owner FROM chats WHERE id = {r}.chat_id)"

#: migration 017's triggers for SQLite
PARKED_SQLITE_STATEMENTS: tuple[str, ...] = (
    "CREATE TRIGGER branch_messages_use_in AFTER INSERT ON branch_messages BEGIN "
    f"{_sqlite_add(_PARKED_OWNER.format(r='NEW'), _PARKED.format(r='NEW'))} END",
    "CREATE TRIGGER branch_messages_use_out AFTER DELETE ON branch_messages BEGIN "
    f"{_sqlite_add(_PARKED_OWNER.format(r='OLD'), '-' + _PARKED.format(r='OLD'))} END",
    "CREATE TRIGGER chats_parked_use_out BEFORE DELETE ON chats BEGIN "
    + _sqlite_add(
        "OLD.owner",
        "-(SELECT coalesce(sum(length(CAST(b.data AS BLOB))), 0) FROM branch_messages b "
        "WHERE b.chat_id = OLD.id)",
    )
    + " END",
)

#: migration 017's triggers for PostgreSQL
PARKED_PG_STATEMENTS: tuple[str, ...] = (
    f"""CREATE FUNCTION tk_use_parked() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE who TEXT; delta BIGINT;
    BEGIN
        IF TG_OP = 'INSERT' THEN
            SELECT owner INTO who FROM chats WHERE id = NEW.chat_id;
            delta := coalesce(octet_length(NEW.data), 0);
        ELSE
            SELECT owner INTO who FROM chats WHERE id = OLD.chat_id;
            delta := -coalesce(octet_length(OLD.data), 0);
        END IF;
        IF who IS NOT NULL AND delta <> 0 THEN
            INSERT INTO storage_use (owner, bytes) VALUES (who, delta) {_ADD};
        END IF;
        RETURN NULL;
    END $$""",
    "CREATE TRIGGER branch_messages_use AFTER INSERT OR DELETE ON branch_messages "
    "FOR EACH ROW EXECUTE FUNCTION tk_use_parked()",
    f"""CREATE FUNCTION tk_use_parked_chat_out() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE delta BIGINT;
    BEGIN
        SELECT coalesce(sum(octet_length(data)), 0) INTO delta FROM branch_messages
        WHERE chat_id = OLD.id;
        IF delta <> 0 THEN
            INSERT INTO storage_use (owner, bytes) VALUES (OLD.owner, -delta) {_ADD};
        END IF;
        RETURN OLD;
    END $$""",
    "CREATE TRIGGER chats_parked_use_out BEFORE DELETE ON chats FOR EACH ROW "
    "EXECUTE FUNCTION tk_use_parked_chat_out()",
)


def _pg_row_edit(t: _Table) -> tuple[str, ...]:
    """``t``'s edit trigger as a row trigger that runs only when what counts (or its owner)
    changed: a statement trigger runs, and captures the rows, for every UPDATE of the table."""
    watched = (*t.columns, "owner")
    changed = " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in watched)
    rows = (
        f"SELECT {t.owner.format(r='OLD')} AS o, -{_size(t.name, 'OLD', 'pg')} AS d "
        f"UNION ALL SELECT {t.owner.format(r='NEW')}, {_size(t.name, 'NEW', 'pg')}"
    )
    return (
        f"""CREATE FUNCTION tk_use_{t.name}_edit() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            {_pg_add(rows)};
            RETURN NULL;
        END $$""",
        f"DROP TRIGGER {t.name}_use_edit ON {t.name}",
        f"CREATE TRIGGER {t.name}_use_edit AFTER UPDATE OF {', '.join(watched)} ON {t.name} "
        f"FOR EACH ROW WHEN ({changed}) EXECUTE FUNCTION tk_use_{t.name}_edit()",
    )


#: migration 018's for PostgreSQL: a chat's row is written on every turn (its ``updated``,
#: its message counts) and its counted columns (name, header) almost never; the statement
#: trigger ran six times a turn to add nothing
ROW_EDIT_PG_STATEMENTS: tuple[str, ...] = _pg_row_edit(SIZED["chats"])
