"""One asyncpg connection seen through the calls the shared store SQL makes of the SQLite
writer connection's (:class:`~tavernkit.store.sqlite_thread.SqliteConnection`).

The SQLite store's queries are written in the SQL both databases speak (``ON CONFLICT``,
``ORDER BY x = ? DESC``, ``COALESCE``, ``IN (...)``); what differs is the driver's surface
(``?`` vs ``$1``, cursors vs record lists, a row count vs a status line) and a few functions.
:class:`PgConn` bridges exactly that: it rewrites each statement once (cached) and runs it, so
the PostgreSQL store runs the same code path, with the same lossless guarantees, as the SQLite
one. Inside a write transaction every plain ``SELECT`` also takes ``FOR UPDATE``: the SQLite
store's read-then-write steps (the next message position, a message's swipes) rely on SQLite
allowing one writer at a time, which PostgreSQL gives per row instead.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncpg

__all__ = ["PgConn", "PgCursor", "to_postgres"]

#: SQLite-only fragments of the shared SQL and their PostgreSQL spelling.
_DIALECT = (
    ("instr(extracted, 'mes') > 0", "strpos(extracted, 'mes') > 0"),
    (
        "json_extract(body, '$.swipe_id') = ?",
        "CASE WHEN json_typeof(body::json -> 'swipe_id') = 'number' "
        "THEN (body::json ->> 'swipe_id')::numeric END = ?",
    ),
    ("ORDER BY rowid", "ORDER BY seq"),
    # SQLite's LIKE ignores the case of ASCII letters; PostgreSQL's ILIKE, of every letter
    ("name LIKE ? ESCAPE '\\'", "name ILIKE ? ESCAPE '\\'"),
)
#: an INSERT of plain values (no ON CONFLICT, no SELECT), which COPY can do for many rows
_PLAIN_INSERT = re.compile(
    r"INSERT INTO (?P<table>\w+) \((?P<columns>[\w, ]+)\) VALUES \([?, ]+\)", re.IGNORECASE
)
#: a statement whose rows come back (the rest give a row count)
_RETURNS_ROWS = re.compile(r"\s*(SELECT|WITH)\b|.*\bRETURNING\b", re.IGNORECASE | re.DOTALL)
#: a SELECT these make a group or a set, which FOR UPDATE cannot lock
_UNLOCKABLE = re.compile(r"\b(GROUP BY|DISTINCT|UNION|COUNT\()", re.IGNORECASE)


@lru_cache(maxsize=512)
def to_postgres(sql: str, for_update: bool = False) -> str:
    """``sql`` (the shared dialect, ``?`` placeholders) as PostgreSQL runs it."""
    for sqlite_form, pg_form in _DIALECT:
        sql = sql.replace(sqlite_form, pg_form)
    parts = sql.split("?")
    out = parts[0] + "".join(f"${n}{part}" for n, part in enumerate(parts[1:], start=1))
    if for_update and out.lstrip().upper().startswith("SELECT") and not _UNLOCKABLE.search(out):
        out += " FOR UPDATE"
    return out


def _rowcount(status: str) -> int:
    """The row count of a command status line (``UPDATE 3``, ``INSERT 0 1``)."""
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else -1


class PgCursor:
    """A finished statement's rows and row count, read like a SQLite cursor."""

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int) -> None:
        self._rows = rows
        self._at = 0
        self.rowcount = rowcount

    async def fetchone(self) -> tuple[Any, ...] | None:
        if self._at >= len(self._rows):
            return None
        self._at += 1
        return self._rows[self._at - 1]

    async def fetchall(self) -> list[tuple[Any, ...]]:
        rest, self._at = self._rows[self._at :], len(self._rows)
        return rest

    def __aiter__(self) -> AsyncIterator[tuple[Any, ...]]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[tuple[Any, ...]]:
        while (row := await self.fetchone()) is not None:
            yield row

    async def __aenter__(self) -> PgCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class _Pending:
    """``db.execute(...)``: awaited, or entered as ``async with``, it runs and gives a cursor."""

    def __init__(self, run: Callable[[], Any]) -> None:
        self._run = run

    def __await__(self) -> Generator[Any, None, PgCursor]:
        return self._run().__await__()  # type: ignore[no-any-return]

    async def __aenter__(self) -> PgCursor:
        cursor: PgCursor = await self._run()
        return cursor

    async def __aexit__(self, *exc: object) -> None:
        return None


class PgConn:
    """One pooled connection for one read or one transaction (see the module docstring)."""

    def __init__(
        self,
        conn: asyncpg.Connection,
        *,
        writing: bool,
        on_statement: Callable[[str, int], None] | None = None,
    ) -> None:
        self._conn = conn
        self._writing = writing
        self._on_statement = on_statement

    def _sql(self, sql: str) -> str:
        return to_postgres(sql, self._writing)

    def _seen(self, sql: str, changes: int) -> None:
        if self._on_statement is not None:
            self._on_statement(sql, changes)

    async def _execute(self, sql: str, params: Sequence[Any]) -> PgCursor:
        text = self._sql(sql)
        if _RETURNS_ROWS.match(text):
            rows = [tuple(r) for r in await self._conn.fetch(text, *params)]
            if self._writing and "(SELECT" in text:
                # A locking read that waited for another writer rechecks the locked row but
                # not its subqueries (the next message position): they saw the snapshot the
                # statement started with. Now that the lock is held, read them again.
                rows = [tuple(r) for r in await self._conn.fetch(text, *params)]
            self._seen(sql, 0)
            return PgCursor(rows, -1)
        status = await self._conn.execute(text, *params)
        count = _rowcount(status)
        self._seen(sql, max(count, 0))
        return PgCursor([], count)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Pending:
        return _Pending(lambda: self._execute(sql, params))

    async def execute_fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return await (await self._execute(sql, params)).fetchall()

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        batch = [tuple(r) for r in rows]
        if not batch:
            return
        plain = _PLAIN_INSERT.fullmatch(sql)
        if plain is not None and len(batch) > 1:
            # One COPY, not a statement per row: the counting triggers fire once, and an
            # import of a long chat is one round trip per table.
            columns = [c.strip() for c in plain["columns"].split(",")]
            await self._conn.copy_records_to_table(plain["table"], records=batch, columns=columns)
        else:
            await self._conn.executemany(self._sql(sql), batch)
        self._seen(sql, len(batch))
