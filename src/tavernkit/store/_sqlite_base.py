"""The plumbing shared by the SQLite store's parts: the connection, the lock, transactions,
error mapping, clock and id helpers, and record lookup by id or name."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ValidationError

from tavernkit.errors import Conflict, FormatError, NotFound, StoreError
from tavernkit.run_to_end import run_to_end
from tavernkit.store._lorebook_rows import BOOK_KIND, book_text
from tavernkit.store.record_types import KINDS, ModelRegistry, RecordInfo
from tavernkit.store.sqlite_thread import SqliteConnection
from tavernkit.worldinfo.gc_pause import gc_paused

__all__ = ["SqliteBase", "WriteStats", "to_json_doc"]

_T = TypeVar("_T")


@dataclass(slots=True)
class WriteStats:
    """What the statements run inside :meth:`SqliteBase.trace` cost. Only counts: the SQL text
    carries bound values (secrets among them), so it is never kept."""

    statements: int = 0
    sql_chars: int = 0
    changes: int = 0
    #: transactions begun (``BEGIN``): on PostgreSQL each costs two more round trips
    transactions: int = 0


def to_json_doc(record: Mapping[str, Any] | BaseModel, *, source: str) -> dict[str, Any]:
    """A record as a JSON-ready dict: ``to_wire()`` for the open formats (keeps their key order
    and only the keys they carried), a full dump for our own closed models."""
    if isinstance(record, BaseModel):
        to_wire = getattr(record, "to_wire", None)
        data = to_wire() if callable(to_wire) else record.model_dump(mode="json", by_alias=True)
    elif isinstance(record, Mapping):
        data = dict(record)
    else:
        raise FormatError(
            f"expected a mapping or a model, got {type(record).__name__}", source=source
        )
    try:
        # Normalise through JSON once so what we return is exactly what a load gives back.
        normal = json.loads(json.dumps(data, ensure_ascii=False))
    except (TypeError, ValueError) as exc:
        raise FormatError(f"not JSON-serialisable: {exc}", source=source) from exc
    if not isinstance(normal, dict):
        raise FormatError("a record must be a JSON object", source=source)
    return normal


@contextmanager
def _store_errors() -> Iterator[None]:
    """sqlite3's errors (and a string SQLite cannot store) as the store's own."""
    try:
        yield
    except sqlite3.Error as exc:
        raise map_sqlite_error(exc) from exc
    except UnicodeEncodeError as exc:
        raise unencodable_error(exc) from exc


def map_sqlite_error(exc: sqlite3.Error) -> StoreError:
    # sqlite3's messages name constraints and tables, never bound values, so they are safe.
    if isinstance(exc, sqlite3.IntegrityError):
        if "UNIQUE" in str(exc) or "PRIMARY KEY" in str(exc):
            return Conflict(f"already exists ({exc})")
        return StoreError(f"integrity error: {exc}")
    return StoreError(f"database error: {exc}")


def unencodable_error(exc: UnicodeEncodeError) -> FormatError:
    # Only the position is named: the text itself may be a secret.
    return FormatError(
        f"text with a character UTF-8 cannot encode (a lone surrogate) at index {exc.start}",
        source="<store>",
    )


class SqliteBase:
    """One writer connection guarded by one asyncio lock, and one read connection on the
    event loop's own thread for the short reads of a turn's start.

    Every call on the writer connection, read or write, takes the lock: the connection is
    shared, so a read running while another task's transaction is open would see that
    transaction's uncommitted rows. SQLite serialises writers anyway, and the calls are short.

    The short reads (:meth:`_read_now`: one chat's row and window, a record, the settings, a
    record's links) go over a second connection instead, called where the read is asked for.
    A trip to the writer's thread and back costs about ten times such a read itself (117 µs
    against 10 µs here), and a turn made four of them before its request could go out. In WAL
    mode that connection reads the last committed state and never waits for a writer, so it
    needs no lock; every statement on it is read to its end at once, so it never keeps an old
    snapshot open. Reads whose size the caller does not bound (a whole chat, a list) stay on
    the thread, where they cannot stall the loop.
    """

    def __init__(
        self,
        conn: SqliteConnection,
        path: Path,
        *,
        models: ModelRegistry,
        clock: Callable[[], datetime],
        new_id: Callable[[], str],
    ) -> None:
        self._conn = conn
        self._path = path
        self._models = dict(models)
        self._clock = clock
        self._new_id = new_id
        self._lock = asyncio.Lock()
        self._closed = False
        self._stats: WriteStats | None = None
        # the read connection (opened at the first short read) and what serialises its use
        # across threads
        self._reader: sqlite3.Connection | None = None
        self._reader_lock = threading.Lock()
        self._reader_trace: Callable[[str], None] | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self._path)!r})"

    @property
    def path(self) -> Path:
        return self._path

    async def _seal_keys_for(self, db: SqliteConnection, owner: str, to: str) -> None:
        """Seal ``owner``'s API key secrets again for ``to``, whom a hand-over gives them (in
        the hand-over's transaction ``db``; the keys' part of the store does it)."""

    def _forget_key_secrets(self, key_ids: list[str]) -> None:
        """What else goes with API keys whose rows a write deleted: nothing since their
        secrets are sealed in those rows (``SqliteKeys``); a hook for a store that keeps more."""

    @property
    def models(self) -> dict[str, type[BaseModel]]:
        """The kind -> model registry; the facade may add to it after opening."""
        return self._models

    async def close(self) -> None:
        async with self._lock:
            if not self._closed:
                self._closed = True
                with self._reader_lock:
                    if self._reader is not None:
                        self._reader.close()
                        self._reader = None
                await self._conn.close()

    # -- transactions -------------------------------------------------------------------
    @asynccontextmanager
    async def _read(self, *, snapshot: bool = True) -> AsyncIterator[SqliteConnection]:
        """A read over the writer connection. ``snapshot=False``: the block's statements need
        not see one state, each standing alone is right (a store that wraps a read of several
        statements in a transaction, PostgreSQL's, then runs them without one)."""
        async with self._lock:
            self._check_open()
            with _store_errors():
                yield self._conn

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[SqliteConnection]:
        """One transaction. Whatever ends it early, a cancellation included (at ``BEGIN``, in a
        statement, at ``COMMIT``, or again during the rollback), the connection leaves it
        outside any transaction: the next write starts clean."""
        async with self._lock:
            self._check_open()
            with _store_errors():
                try:
                    await self._conn.execute("BEGIN IMMEDIATE")
                    yield self._conn
                    await self._conn.execute("COMMIT")
                except BaseException:
                    # Held under the lock until done, so no other call runs mid-rollback.
                    await run_to_end(self._rollback())
                    raise

    async def _write_at_once(self, fn: Callable[[SqliteConnection], Awaitable[_T]]) -> _T:
        """One transaction of the statements ``fn`` makes (a helper that only executes them,
        never waiting on anything else), run whole on the writer's thread in one trip instead
        of a trip per statement: a turn's reply place is six statements, and each trip woke the
        loop while the turn's request was in flight. A caller cancelled meanwhile stops
        waiting; the transaction still ends on the thread, committed or rolled back, before
        the next call's (as a cancelled ``COMMIT`` does in :meth:`_write`)."""
        async with self._lock:
            self._check_open()

            def run(conn: sqlite3.Connection) -> _T:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    result = cast(_T, run_now(fn(cast(SqliteConnection, CallsNow(conn)))))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                return result

            with _store_errors():
                return await self._conn.run(run)

    @asynccontextmanager
    async def _read_now(self, *, snapshot: bool = True) -> AsyncIterator[SqliteConnection]:
        """A short read over the read connection, on the caller's thread (see the class doc);
        its calls answer at once. Over the writer connection, as :meth:`_read` (``snapshot``
        is its), where there is no read connection (a store that has none: PostgreSQL's
        pool)."""
        self._check_open()
        if self._read_conn() is None:
            async with self._read(snapshot=snapshot) as db:
                yield db
            return
        with _store_errors():
            yield cast(SqliteConnection, _ReadsNow(self))

    async def _on_reader(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """``fn`` over the read connection inside one read transaction (one snapshot for all
        its statements), here and now; on the writer's thread where the read connection is busy
        (a WAL reader is only while another connection recovers the file): there
        ``busy_timeout`` waits without stalling the loop."""
        self._check_open()
        reader = self._read_conn()
        if reader is not None:
            try:
                with self._reader_lock:
                    reader.execute("BEGIN")
                    try:
                        return fn(reader)
                    finally:
                        reader.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    raise map_sqlite_error(exc) from exc
            except sqlite3.Error as exc:
                raise map_sqlite_error(exc) from exc
        async with self._read() as db:
            return await db.run(fn)

    def _read_conn(self) -> sqlite3.Connection | None:
        if self._reader is None:
            with self._reader_lock:
                if self._reader is None and not self._closed:
                    try:
                        reader = sqlite3.connect(
                            self._path, isolation_level=None, check_same_thread=False
                        )
                    except sqlite3.Error as exc:
                        raise StoreError(f"cannot open database {self._path}: {exc}") from exc
                    # never waits: a busy read goes to the thread instead (_ReadsNow)
                    reader.execute("PRAGMA busy_timeout=0")
                    reader.execute("PRAGMA query_only=ON")
                    reader.set_trace_callback(self._reader_trace)
                    self._reader = reader
        return self._reader

    def _data_version(self) -> int | None:
        """The read connection's ``PRAGMA data_version``: it changes whenever another
        connection (this store's writer, another process) commits. ``None`` where there is no
        read connection or it is busy: then nothing may be assumed unchanged."""
        if self._read_conn() is None:
            return None
        rows = self._fetch_now("PRAGMA data_version", ())
        return int(rows[0][0]) if rows else None

    def _fetch_now(self, sql: str, parameters: Any) -> list[Any] | None:
        """Every row of ``sql`` over the read connection; ``None`` when it is busy."""
        reader = self._reader
        if reader is None:
            raise StoreError("the store is closed")
        try:
            with self._reader_lock:
                cur = reader.execute(sql, parameters)
                try:
                    return cur.fetchall()
                finally:
                    cur.close()
        except sqlite3.OperationalError as exc:
            if _busy(exc):
                return None
            raise

    async def _rollback(self) -> None:
        """End the open transaction, if any. It is asked of the database, not of
        ``in_transaction``: a cancelled ``BEGIN`` or ``COMMIT`` may still be queued on the
        connection's thread, and this statement runs after it."""
        try:
            await self._conn.execute("ROLLBACK")
        except sqlite3.OperationalError as exc:
            # SQLite rolled back by itself, BEGIN failed, or COMMIT had already run.
            if "no transaction is active" not in str(exc):
                raise

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the store is closed")

    @asynccontextmanager
    async def trace(self, each: Callable[[str], None] | None = None) -> AsyncIterator[WriteStats]:
        """Count the statements and row changes of the calls made inside the block (for tests
        and benchmarks: an append must cost the same whatever the chat's length). ``each``
        sees every statement's text as it starts (``BEGIN``/``COMMIT`` too), on the
        connection's thread: tests use it to act at an exact point of a write."""
        stats = WriteStats()

        def on_statement(sql: str) -> None:
            if each is not None:
                each(sql)
            if sql.startswith("BEGIN"):
                stats.transactions += 1
            if sql not in ("BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"):
                stats.statements += 1
                stats.sql_chars += len(sql)

        before = self._conn.total_changes
        await self._conn.set_trace_callback(on_statement)
        self._trace_reads(on_statement)
        try:
            yield stats
        finally:
            self._trace_reads(None)
            await self._conn.set_trace_callback(None)
            stats.changes = self._conn.total_changes - before

    def _trace_reads(self, each: Callable[[str], None] | None) -> None:
        with self._reader_lock:
            self._reader_trace = each
            if self._reader is not None:
                self._reader.set_trace_callback(each)

    # -- helpers ------------------------------------------------------------------------
    def _now(self) -> str:
        return self._clock().isoformat()

    @staticmethod
    def _check_kind(kind: str) -> None:
        if kind not in KINDS:
            raise StoreError(f"unknown record kind {kind!r}")

    @staticmethod
    def _info(row: sqlite3.Row | tuple[Any, ...]) -> RecordInfo:
        kind, rid, name, owner, created, updated = row[:6]
        return RecordInfo(
            kind=kind,
            id=rid,
            name=name,
            owner=owner,
            created=datetime.fromisoformat(created),
            updated=datetime.fromisoformat(updated),
        )

    def _validate(
        self, kind: str, data: dict[str, Any], source: str, *, stored: bool = False
    ) -> BaseModel:
        """``data`` as kind's model (``stored``: JSON read back from our own rows)."""
        cls = self._models.get(kind)
        if cls is None:
            raise StoreError(f"no model is registered for kind {kind!r}")
        try:
            if stored:
                # a big book is tens of thousands of new objects, none in a cycle
                with gc_paused():
                    return cls.model_validate(data)
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0] if exc.errors() else None
            where = ".".join(str(p) for p in first["loc"]) if first else None
            msg = first["msg"] if first else str(exc)
            raise FormatError(msg, source=source, field=where) from exc

    async def _resolve(
        self, db: SqliteConnection, kind: str, ref: str, owner: str
    ) -> tuple[RecordInfo, str]:
        """(info, data JSON) of the record ``ref`` names: its id, else its name."""
        row = await self._record_row(
            db, kind, ref, owner, "kind, id, name, owner, created, updated, data"
        )
        return self._info(row), str(row[6])

    #: a book's ``records.data`` and its entry rows' ``"uid":{...}`` joined in order (see
    #: :mod:`tavernkit.store._lorebook_rows`), in one statement: one snapshot of both
    _BOOK_SQL = (
        "SELECT (SELECT data FROM records WHERE id = ?), (SELECT group_concat(x, ',') FROM "
        "(SELECT json_quote(uid) || ':' || data AS x FROM lorebook_entries "
        "WHERE record_id = ? ORDER BY seq))"
    )

    async def _whole(
        self, db: SqliteConnection, kind: str, rid: str, text: str, *, now: bool = False
    ) -> str:
        """The record's whole JSON from ``text``, its ``records.data``: a lorebook's read
        again with its entry rows in place. ``now``: ``db`` is the read connection on the
        caller's thread (:meth:`_read_now`); a book's rows are joined on the writer's thread
        instead, where 20,000 of them do not hold the event loop."""
        if kind != BOOK_KIND:
            return text
        if now and self._read_conn() is not None:
            async with self._read() as thread_db:
                rows = list(await thread_db.execute_fetchall(self._BOOK_SQL, (rid, rid)))
        else:
            rows = list(await db.execute_fetchall(self._BOOK_SQL, (rid, rid)))
        if not rows or rows[0][0] is None:
            raise NotFound(f"no {kind} {rid!r}")
        rest, entries = rows[0]
        return book_text(str(rest), None if entries is None else str(entries))

    async def _record_row(
        self, db: SqliteConnection, kind: str, ref: str, owner: str, cols: str
    ) -> Any:
        """Columns ``cols`` of the record ``ref`` names: its id, else its name."""
        self._check_kind(kind)
        # One query: the id's row sorts first if there is one. Two lookups joined, each on its
        # index (``id = ? OR name = ?`` read every record of the kind: all the cards).
        rows = list(
            await db.execute_fetchall(
                f"SELECT {cols}, id, 0 AS k FROM records WHERE id = ? AND owner = ? AND kind = ? "
                f"UNION ALL SELECT {cols}, id, 1 FROM records "
                "WHERE owner = ? AND kind = ? AND name = ? ORDER BY k LIMIT 2",
                (ref, owner, kind, owner, kind, ref),
            )
        )
        if rows and rows[0][-2] == ref:
            return rows[0][:-2]
        if not rows:
            raise NotFound(f"no {kind} {ref!r}")
        if len(rows) > 1:
            raise Conflict(f"more than one {kind} is named {ref!r}; use its id")
        return rows[0][:-2]


def _busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


class _ReadsNow:
    """The one call of the writer connection the short reads make (``execute_fetchall``),
    over the store's read connection: it runs at once and reads every row before it answers,
    so no statement stays open (and with it an old snapshot). A busy read connection sends the
    statement to the writer's thread, which waits."""

    def __init__(self, store: SqliteBase) -> None:
        self._store = store

    async def execute_fetchall(self, sql: str, parameters: Any = ()) -> list[Any]:
        rows = self._store._fetch_now(sql, parameters)
        if rows is None:
            async with self._store._read() as db:
                rows = list(await db.execute_fetchall(sql, parameters))
        return rows


class CallsNow:
    """A raw connection behind the writer connection's calls that the store's helpers make
    (the read connection, or the writer on its thread): it answers at once, so a helper's
    coroutine never waits (:func:`run_now` runs it)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, parameters: Any = ()) -> sqlite3.Cursor:
        return self._conn.execute(sql, parameters)

    async def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        return self._conn.executemany(sql, rows)

    async def execute_fetchall(self, sql: str, parameters: Any = ()) -> list[Any]:
        return self._conn.execute(sql, parameters).fetchall()


def run_now(coro: Any) -> Any:
    """Run a coroutine that never waits to its end, here and now."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("a read over a raw connection tried to wait")
