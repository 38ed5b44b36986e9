"""How the shared store SQL is rewritten for PostgreSQL (store/_pg_conn.py): placeholders,
the SQLite-only functions, and the row locks of a write transaction."""

from __future__ import annotations

from tavernkit.store._pg_conn import _RETURNS_ROWS, to_postgres


def test_placeholders_become_numbered() -> None:
    sql = "SELECT a FROM t WHERE b = ? AND c IN (?,?) LIMIT ?"
    assert to_postgres(sql) == "SELECT a FROM t WHERE b = $1 AND c IN ($2,$3) LIMIT $4"


def test_sqlite_functions_get_their_postgresql_spelling() -> None:
    sql = (
        "UPDATE messages SET mes = ? WHERE id = ? AND instr(extracted, 'mes') > 0 "
        "AND json_extract(body, '$.swipe_id') = ?"
    )
    out = to_postgres(sql)
    assert "instr(" not in out and "strpos(extracted, 'mes') > 0" in out
    assert "json_extract" not in out and out.endswith("::numeric END = $3")
    assert to_postgres("SELECT name FROM b WHERE x = ? ORDER BY rowid").endswith("ORDER BY seq")


def test_a_write_transaction_locks_the_rows_its_selects_read() -> None:
    sql = "SELECT id FROM chats WHERE id = ?"
    assert to_postgres(sql, True) == "SELECT id FROM chats WHERE id = $1 FOR UPDATE"
    assert to_postgres(sql, False) == "SELECT id FROM chats WHERE id = $1"
    # what FOR UPDATE cannot lock is left alone, and so is anything but a SELECT
    grouped = "SELECT chat_id, COUNT(*) FROM messages GROUP BY chat_id"
    assert to_postgres(grouped, True) == grouped
    assert not to_postgres("UPDATE t SET a = ?", True).endswith("FOR UPDATE")


def test_which_statements_return_rows() -> None:
    assert _RETURNS_ROWS.match("  select 1")
    assert _RETURNS_ROWS.match("WITH a AS (SELECT 1) SELECT * FROM a")
    assert _RETURNS_ROWS.match("INSERT INTO t (a) VALUES ($1) RETURNING id")
    assert not _RETURNS_ROWS.match("UPDATE t SET a = 1")
