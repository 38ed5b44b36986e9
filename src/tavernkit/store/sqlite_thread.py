"""One ``sqlite3`` connection used from one worker thread and awaited from the event loop.

SQLite's calls block; the store's writes (and the reads that must see its open transaction)
run on a thread of their own, one call after another in the order they were asked, so the loop
never waits on the file. The calls are the few the store's SQL makes (``execute`` awaited or
used as ``async with``, ``execute_fetchall``, ``executemany``), plus :meth:`run`: a whole
function of the raw connection in one trip (a turn's reply place is six statements; a trip per
statement woke the loop six times while the turn's request was in flight).

Why not aiosqlite, which has the same shape: running a function on its thread is only
possible through its private ``_execute``, and everything else it adds (a thread per
connection, a queue, logging of each call with its SQL and bound values) we either do here
or do not want (the values are keys and messages). A cancelled caller stops waiting; its call
still runs on the thread, in its turn, before any call asked after it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Generator, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

__all__ = ["SqliteConnection", "SqliteCursor", "connect"]

_T = TypeVar("_T")

#: rows fetched a trip when a cursor is iterated
_CHUNK = 64


class SqliteCursor:
    """A statement's cursor: its rows fetched on the connection's thread."""

    def __init__(self, owner: SqliteConnection, cursor: sqlite3.Cursor) -> None:
        self._owner = owner
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid

    async def __aiter__(self) -> AsyncIterator[Any]:
        """The rows, fetched a chunk at a time (a big result is never held whole)."""
        while rows := await self._owner.run(lambda _conn: self._cursor.fetchmany(_CHUNK)):
            for row in rows:
                yield row

    async def fetchone(self) -> Any:
        return await self._owner.run(lambda _conn: self._cursor.fetchone())

    async def fetchall(self) -> list[Any]:
        return await self._owner.run(lambda _conn: self._cursor.fetchall())

    async def close(self) -> None:
        await self._owner.run(lambda _conn: self._cursor.close())


class _Statement:
    """``execute``'s answer: awaited, the cursor; in ``async with``, the cursor closed after."""

    def __init__(self, owner: SqliteConnection, sql: str, parameters: Any) -> None:
        self._owner = owner
        self._sql = sql
        self._parameters = parameters
        self._cursor: SqliteCursor | None = None

    async def _start(self) -> SqliteCursor:
        sql, parameters = self._sql, self._parameters
        raw = await self._owner.run(lambda conn: conn.execute(sql, parameters))
        return SqliteCursor(self._owner, raw)

    def __await__(self) -> Generator[Any, None, SqliteCursor]:
        return self._start().__await__()

    async def __aenter__(self) -> SqliteCursor:
        self._cursor = await self._start()
        return self._cursor

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._cursor is not None:
            await self._cursor.close()


class SqliteConnection:
    """The connection and its thread (see the module doc). Open it with :func:`connect`."""

    def __init__(self, conn: sqlite3.Connection, thread: ThreadPoolExecutor) -> None:
        self._conn = conn
        self._thread = thread

    async def run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """``fn(connection)`` on the connection's thread, after every call asked before it."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, fn, self._conn)

    def execute(self, sql: str, parameters: Any = ()) -> _Statement:
        return _Statement(self, sql, parameters)

    async def execute_fetchall(self, sql: str, parameters: Any = ()) -> list[Any]:
        def fetch(conn: sqlite3.Connection) -> list[Any]:
            cursor = conn.execute(sql, parameters)
            try:
                return cursor.fetchall()
            finally:
                cursor.close()

        return await self.run(fetch)

    async def executemany(self, sql: str, rows: Iterable[Any]) -> SqliteCursor:
        raw = await self.run(lambda conn: conn.executemany(sql, rows))
        return SqliteCursor(self, raw)

    async def set_trace_callback(self, each: Callable[[str], None] | None) -> None:
        await self.run(lambda conn: conn.set_trace_callback(each))

    @property
    def total_changes(self) -> int:
        return self._conn.total_changes

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    async def close(self) -> None:
        """Close the connection (after every call already asked) and stop its thread."""
        try:
            await self.run(lambda conn: conn.close())
        finally:
            self._thread.shutdown(wait=False)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


async def connect(path: str | Path, **options: Any) -> SqliteConnection:
    """Open ``path`` (``options`` as :func:`sqlite3.connect` takes them) on a thread of its
    own. The connection is made on that thread and only ever used there."""
    thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tavernkit-sqlite")
    loop = asyncio.get_running_loop()
    options.setdefault("check_same_thread", False)
    try:
        conn = await loop.run_in_executor(thread, lambda: sqlite3.connect(path, **options))
    except BaseException:
        thread.shutdown(wait=False)
        raise
    return SqliteConnection(conn, thread)
