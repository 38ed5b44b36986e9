"""The PostgreSQL store (asyncpg): the same :class:`~tavernkit.store.protocol.Store` as the
embedded SQLite one, for several server processes sharing one database.

It is the SQLite store's code on another connection: the record, chat, message and swipe logic
(and so the lossless row layout of :mod:`tavernkit.store._message_rows`) is
:class:`~tavernkit.store.sqlite.SqliteStore`'s, whose SQL is written in the dialect both
databases share; :class:`~tavernkit.store._pg_conn.PgConn` bridges the driver and the few
functions that differ. What this module changes is how a call gets a connection: a pool, one
pooled connection per read (a read-only REPEATABLE READ transaction, so a read of several
statements sees one state; a read whose statements each stand alone, ``snapshot=False``, runs
them without one: ``BEGIN`` and ``COMMIT`` were two of a short read's three round trips) or
per write (a READ COMMITTED transaction whose SELECTs lock the rows they read), so calls of
one process run concurrently and several processes write safely. A connection goes back to
the pool as it is (an open transaction rolled back): the store changes no session state, so
asyncpg's reset query, one more round trip per call, is only run after
:meth:`PostgresStore.execute_admin` and the migrations.
Migrations: :mod:`tavernkit.store.pg_migrations`.

API key secrets: as with SQLite, each is in its row, sealed with the deployment's secret key
(:mod:`tavernkit.store.secret_key`), so a process on any host can use a key another saved; a
CHECK lets no plaintext in. Older versions kept them in private files on the machine that saved
them (``TAVERNKIT_KEY_DIR``, else ``<data dir>/postgres-keys/<host>_<port>_<database>``:
:func:`default_key_dir`); opening the store moves any found there into the database.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import urlsplit

from tavernkit.errors import Conflict, FormatError, NotFound, StoreError, StoreUnavailable
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.store._lorebook_rows import is_entry_path
from tavernkit.store._message_rows import SplitMessage
from tavernkit.store._pg_conn import PgConn
from tavernkit.store._search_text import has_no_word_breaks, prefix_tsquery
from tavernkit.store._sqlite_base import WriteStats, unencodable_error
from tavernkit.store._sqlite_search import MatchSql
from tavernkit.store.chat_types import SwipeText, TurnStart
from tavernkit.store.key_files import KeyFiles
from tavernkit.store.paths import data_dir
from tavernkit.store.pg_message_writes import append_message_rows, replace_message_row
from tavernkit.store.pg_migrations import apply_pg_migrations
from tavernkit.store.pg_swipe_texts import write_swipe_texts
from tavernkit.store.pg_turn_start import read_turn_start
from tavernkit.store.record_types import ModelRegistry
from tavernkit.store.registry import default_models
from tavernkit.store.sqlite import SqliteStore, new_record_id

_T = TypeVar("_T")

#: connections of a process's pool (``serve --database-pool``): a call holds one for its
#: statements only (~1-5 ms a transaction on a loopback database), so 20 carry thousands of
#: calls a second, and a few processes stay under PostgreSQL's default ``max_connections``
#: of 100; more calls than connections wait for one
DEFAULT_DATABASE_POOL = 20
#: how long a call waits for a free pooled connection before it fails (503 at the server)
POOL_WAIT_S = 10.0
#: how long a connection that cannot be opened is tried again before the call fails
CONNECT_RETRY_S = 3.0

if TYPE_CHECKING:
    import asyncpg

    from tavernkit.store.sqlite_thread import SqliteConnection

__all__ = [
    "DEFAULT_DATABASE_POOL",
    "PostgresStore",
    "default_key_dir",
    "is_postgres_url",
    "open_postgres_store",
    "postgres_match",
    "redact_url",
]

_URL = re.compile(r"^postgres(ql)?://", re.IGNORECASE)


def is_postgres_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return isinstance(target, str) and _URL.match(target) is not None


def redact_url(url: str) -> str:
    """``url`` without its password (what errors and logs may show)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return parts._replace(netloc=netloc).geturl()


def default_key_dir(url: str) -> Path:
    """Where older versions kept the key secrets of the database at ``url`` on this machine:
    ``TAVERNKIT_KEY_DIR`` when set, else ``<data dir>/postgres-keys/<host>_<port>_<database>``.
    They belong to the database, not to a home: ``--home`` does not move them."""
    env = os.environ.get("TAVERNKIT_KEY_DIR")
    if env:
        return Path(env)
    parts = urlsplit(url)
    database = parts.path.lstrip("/") or parts.username or "postgres"
    label = f"{parts.hostname or 'local'}_{parts.port or 5432}_{database}"
    return data_dir() / "postgres-keys" / re.sub(r"[^A-Za-z0-9._-]", "_", label)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def postgres_match(terms: Sequence[str], indexed: bool = True) -> MatchSql:
    """PostgreSQL's conditions for a message search's terms (SQLite's:
    :func:`~tavernkit.store._sqlite_search.sqlite_match`). The word index (migration 008)
    finds the messages whose words start with each term's words (``'term':*``, one quoted
    lexeme each: no input is read as an operator), then each term is checked on the text as
    SQLite checks it, a case-insensitive substring. A term the index cannot find (CJK text, no
    letter or digit in it) is checked on the text of every message in scope."""
    match = MatchSql()
    worded = [t for t in terms if not has_no_word_breaks(t)]
    if worded:
        # the same expression as the index's, or the index is not used
        match.where.append("to_tsvector('simple', m.mes) @@ to_tsquery('simple', ?)")
        match.params.append(" & ".join(prefix_tsquery(t) for t in worded))
    for term in terms:
        match.where.append("strpos(lower(m.mes), lower(?)) > 0")
        match.params.append(term)
    return match


def is_unavailable(exc: BaseException) -> bool:
    """Whether a driver error says the database cannot be used now (unreachable, restarting,
    out of connections, a connection lost, no free pooled connection in time) rather than
    that the statement is wrong."""
    import asyncpg  # optional extra, imported where used

    gone = (
        OSError,  # refused, reset, unreachable; TimeoutError (no free connection) too
        asyncpg.PostgresConnectionError,
        asyncpg.OperatorInterventionError,  # shutting down, starting up
        asyncpg.InsufficientResourcesError,  # too many connections
    )
    if isinstance(exc, gone):
        return True
    return isinstance(exc, asyncpg.InterfaceError) and "clos" in str(exc)


def map_pg_error(exc: BaseException, what: str = "database error") -> StoreError | FormatError:
    """A driver error as the store's own. PostgreSQL's message names constraints and types,
    never bound values (those are in its DETAIL, which is not shown)."""
    import asyncpg  # optional extra, imported where used

    if isinstance(exc, asyncpg.DataError):
        # Raised before the query is sent, for a value the driver cannot encode; its message
        # quotes the value (a secret, maybe), so only the cause's kind is named.
        cause = exc.__cause__
        if isinstance(cause, UnicodeEncodeError):
            return unencodable_error(cause)
        return FormatError(f"a value the database cannot take ({type(cause).__name__})")
    if is_unavailable(exc):
        # the driver's words name the server's address: the class alone says what happened
        return StoreUnavailable(f"the database is unavailable ({type(exc).__name__})")
    message = getattr(exc, "message", None) or str(exc)
    if isinstance(exc, asyncpg.UniqueViolationError):
        return Conflict(f"already exists ({message})")
    unstorable = asyncpg.CharacterNotInRepertoireError | asyncpg.UntranslatableCharacterError
    if isinstance(exc, unstorable):
        return FormatError(f"text PostgreSQL cannot hold (a NUL character?): {message}")
    return StoreError(f"{what}: {message}")


class PostgresStore(SqliteStore):
    """The :class:`~tavernkit.store.protocol.Store` on a PostgreSQL database (see the module
    docstring). :attr:`path` is the folder older versions kept the API key files in."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        url: str,
        *,
        key_dir: Path,
        models: ModelRegistry,
        clock: Callable[[], datetime],
        new_id: Callable[[], str],
    ) -> None:
        # The base keeps a connection for close(); here that is the pool.
        super().__init__(pool, key_dir, models=models, clock=clock, new_id=new_id)
        self._pool = pool
        self._url = url
        self._tracer: Callable[[str, int], None] | None = None

    #: records are TEXT here (jsonb reorders keys): a member is written in Python, off the
    #: loop, and read by the ``json`` operators below (which keep its text)
    _json_in_sql = False

    #: SQLite's, with PostgreSQL's ordered aggregate
    _BOOK_SQL = (
        "SELECT (SELECT data FROM records WHERE id = ?), (SELECT string_agg(to_json(uid)::text "
        "|| ':' || data, ',' ORDER BY seq) FROM lorebook_entries WHERE record_id = ?)"
    )

    async def get_record_member(
        self, kind: str, ref: str, path: Sequence[str], *, owner: str = DEFAULT_OWNER
    ) -> Any:
        if is_entry_path(kind, path):  # a lorebook's entry rows: the shared code
            return await super().get_record_member(kind, ref, path, owner=owner)
        async with self._read() as db:
            rid = (await self._record_row(db, kind, ref, owner, "id"))[0]
            rows = list(
                await db.execute_fetchall(
                    "SELECT (data::json #> ?::text[])::text FROM records WHERE id = ?",
                    (list(path), rid),
                )
            )
        if not rows or rows[0][0] is None:
            raise NotFound(f"no {'.'.join(path)} in this record")
        return json.loads(str(rows[0][0]))

    async def record_member_keys(
        self, kind: str, ref: str, path: Sequence[str], *, owner: str = DEFAULT_OWNER
    ) -> list[str]:
        if is_entry_path(kind, path):
            return await super().record_member_keys(kind, ref, path, owner=owner)
        # keys in the document's order (WITH ORDINALITY); anything but an object has none
        async with self._read() as db:
            rid = (await self._record_row(db, kind, ref, owner, "id"))[0]
            rows = await db.execute_fetchall(
                "SELECT k.key FROM records r, LATERAL json_object_keys(CASE WHEN "
                "json_typeof(r.data::json #> ?::text[]) = 'object' THEN r.data::json #> "
                "?::text[] ELSE '{}'::json END) WITH ORDINALITY AS k(key, n) "
                "WHERE r.id = ? ORDER BY k.n",
                (list(path), list(path), rid),
            )
        return [str(row[0]) for row in rows]

    def __repr__(self) -> str:
        return f"PostgresStore({redact_url(self._url)!r})"

    @property
    def url(self) -> str:
        """The database URL, without its password."""
        return redact_url(self._url)

    @property
    def key_files(self) -> KeyFiles:
        return KeyFiles(self._path)

    @property
    def connections_in_use(self) -> int:
        """How many of the pool's connections are taken now (the server's metrics)."""
        return int(self._pool.get_size() - self._pool.get_idle_size())

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._pool.close()

    async def pragma(self, name: str) -> Any:
        raise StoreError("PRAGMA is SQLite's; a PostgreSQL store has none")

    async def refresh_statistics(self) -> None:
        """``ANALYZE``: fresh planner statistics after a bulk load (a copy, a big import), so
        the first turns do not wait for autovacuum to notice the new rows."""
        await self.execute_admin("ANALYZE")

    async def execute_admin(self, sql: str) -> str:
        """Run one statement outside the store's calls (tests and ``tavernkit migrate``)."""
        self._check_open()
        try:
            async with self._pool.acquire() as conn:
                status = str(await conn.execute(sql))
                await conn.reset()  # whatever session state ``sql`` set is not kept
                return status
        except Exception as exc:
            if _is_driver_error(exc):
                raise map_pg_error(exc) from exc
            raise

    # the message search: the word index of migration 008, always there
    _search_match = staticmethod(postgres_match)
    _search_indexed = True

    async def update_swipe_texts(self, items: Sequence[SwipeText]) -> list[int]:
        if not items:
            return []
        # one statement, a transaction by itself (no BEGIN/COMMIT): one round trip a batch
        async with self._connection(writing=False, snapshot=False) as db:
            return await write_swipe_texts(db, items)

    async def _append_rows(
        self,
        chat_id: str,
        owner: str,
        docs: list[dict[str, Any]],
        last_partial: Collection[int],
        detached: bool,
    ) -> tuple[int, list[str]]:
        rows = self._new_messages(docs, last_partial)
        # one statement, a transaction by itself (pg_message_writes): one round trip
        async with self._connection(writing=False, snapshot=False) as db:
            position = await append_message_rows(db, chat_id, owner, rows, self._now())
        if position is None:  # another append took the position meanwhile: the transaction
            return await super()._append_rows(chat_id, owner, docs, last_partial, detached)
        return position, [mid for mid, _ in rows]

    async def _replace_message(self, message_id: str, owner: str, split: SplitMessage) -> None:
        async with self._connection(writing=False, snapshot=False) as db:
            await replace_message_row(db, message_id, owner, split, self._now())

    async def _lock_message(self, db: SqliteConnection, message_id: str, owner: str) -> None:
        # The message's and its chat's rows first, as every other writer of a chat takes them
        # (the write transaction's SELECTs lock what they read): streaming into a swipe would
        # otherwise lock the swipe, then the message, the reverse of a swipe append's order.
        await db.execute_fetchall(
            "SELECT m.id FROM messages m JOIN chats c ON c.id = m.chat_id "
            "WHERE m.id = ? AND c.owner = ?",
            (message_id, owner),
        )

    async def load_turn_start(
        self, chat_ref: str, *, last: int, owner: str = DEFAULT_OWNER
    ) -> TurnStart:
        if last < 1:
            raise StoreError(f"a chat window holds at least one message, not {last}")
        # one statement, one snapshot (pg_turn_start): one round trip
        async with self._connection(writing=False, snapshot=False) as db:
            read = await read_turn_start(db, chat_ref, last, owner)
        settings = (
            None
            if read.settings is None
            else self._validate("settings", json.loads(read.settings), "<store settings>")
        )
        variables = {name: json.loads(value) for name, value in read.variables}
        return TurnStart(settings, read.window, variables)

    # -- connections and transactions -----------------------------------------------------
    def _read_conn(self) -> None:
        # no second connection: the pool's reads already run on the loop's own thread, so the
        # short reads (SqliteBase._read_now) are ordinary ones
        return None

    @asynccontextmanager
    async def _read(self, *, snapshot: bool = True) -> AsyncIterator[SqliteConnection]:
        async with self._connection(writing=False, snapshot=snapshot) as db:
            yield db

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[SqliteConnection]:
        async with self._connection(writing=True) as db:
            yield db

    async def _write_at_once(self, fn: Callable[[SqliteConnection], Awaitable[_T]]) -> _T:
        # the pool's statements already run on the loop's thread: one transaction, as any
        async with self._write() as db:
            return await fn(db)

    async def _acquire(self) -> asyncpg.pool.PoolConnectionProxy:
        """A pooled connection, waiting at most :data:`POOL_WAIT_S` for a free one; a
        connection that cannot be opened (the database restarting) is tried again with
        backoff, 50 ms doubling to 1 s, for :data:`CONNECT_RETRY_S`: nothing ran yet."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + CONNECT_RETRY_S
        backoff = 0.05
        while True:
            try:
                return await self._pool.acquire(timeout=POOL_WAIT_S)
            except TimeoutError:
                raise  # every connection busy: waiting longer would only queue more
            except Exception as exc:
                if not is_unavailable(exc) or loop.time() + backoff > give_up:
                    raise
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    @asynccontextmanager
    async def _connection(
        self, *, writing: bool, snapshot: bool = True
    ) -> AsyncIterator[SqliteConnection]:
        self._check_open()
        try:
            async with _Released(self._pool, await self._acquire()) as conn:
                adapter = PgConn(conn, writing=writing, on_statement=self._tracer)
                # The shared code is typed on the SQLite writer connection; PgConn has the part
                # of its surface that code uses (execute, execute_fetchall, executemany).
                db = cast("SqliteConnection", adapter)
                if not (writing or snapshot):
                    yield db  # each statement its own transaction: it sees what is committed
                    return
                transaction = (
                    conn.transaction()
                    if writing
                    else conn.transaction(isolation="repeatable_read", readonly=True)
                )
                async with self._traced(transaction):
                    yield db
        except UnicodeEncodeError as exc:
            raise unencodable_error(exc) from exc
        except Exception as exc:
            if _is_driver_error(exc):
                if is_unavailable(exc) and not isinstance(exc, TimeoutError):
                    # the other pooled connections died with this one (a restart): the next
                    # calls open fresh ones instead of failing on each stale one in turn
                    await self._pool.expire_connections()
                raise map_pg_error(exc) from exc
            raise

    @asynccontextmanager
    async def _traced(self, transaction: asyncpg.transaction.Transaction) -> AsyncIterator[None]:
        """``async with transaction``, its ``BEGIN`` and its end told to :meth:`trace`."""
        tracer = self._tracer
        if tracer is not None:
            tracer("BEGIN", 0)
        try:
            async with transaction:
                yield
        except BaseException:
            if tracer is not None:
                tracer("ROLLBACK", 0)
            raise
        if tracer is not None:
            tracer("COMMIT", 0)

    @asynccontextmanager
    async def trace(self, each: Callable[[str], None] | None = None) -> AsyncIterator[WriteStats]:
        """Count the statements, the transactions and the rows the statements changed (rows
        changed by triggers are not counted here, unlike SQLite's count) of the calls made
        inside the block. ``each`` sees every statement's text (``BEGIN``, ``COMMIT`` and
        ``ROLLBACK`` too): each is a round trip to the database."""
        stats = WriteStats()

        def on_statement(sql: str, changes: int) -> None:
            if each is not None:
                each(sql)
            if sql in ("BEGIN", "COMMIT", "ROLLBACK"):
                stats.transactions += sql == "BEGIN"
                return
            stats.statements += 1
            stats.sql_chars += len(sql)
            stats.changes += changes

        self._tracer = on_statement
        try:
            yield stats
        finally:
            self._tracer = None


class _Released:
    """``async with``: a connection :meth:`PostgresStore._acquire` took, given back after."""

    def __init__(self, pool: asyncpg.Pool, conn: asyncpg.pool.PoolConnectionProxy) -> None:
        self._pool = pool
        self._conn = conn

    async def __aenter__(self) -> asyncpg.pool.PoolConnectionProxy:
        return self._conn

    async def __aexit__(self, *exc: object) -> None:
        await self._pool.release(self._conn)


async def _keep_session(conn: asyncpg.Connection) -> None:
    """The pool's reset of a connection given back: nothing more than asyncpg's own rollback
    of an open transaction. The store's calls set no session state (no ``SET``, ``LISTEN``,
    cursor or advisory lock), so the default reset query was a round trip per call for
    nothing; :meth:`PostgresStore.execute_admin` and the migrations reset in full."""


def _is_driver_error(exc: BaseException) -> bool:
    import asyncpg  # optional extra, imported where used

    return isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError | OSError)


async def open_postgres_store(
    url: str,
    *,
    models: ModelRegistry | None = None,
    clock: Callable[[], datetime] = _utc_now,
    new_id: Callable[[], str] | None = None,
    key_dir: Path | None = None,
    min_size: int = 1,
    max_size: int = DEFAULT_DATABASE_POOL,
) -> PostgresStore:
    """Connect to the database at ``url`` (a pool of ``min_size`` to ``max_size``
    connections), migrate it as needed and return the store. Errors name the URL without its
    password."""
    try:
        import asyncpg  # optional extra: pip install 'tavernkit[scale]'
    except ImportError as exc:
        raise StoreError(
            "a PostgreSQL store needs asyncpg: pip install 'tavernkit[scale]'"
        ) from exc
    if not is_postgres_url(url):
        raise StoreError(f"not a PostgreSQL URL: {redact_url(url)!r}")
    try:
        pool = await asyncio.wait_for(
            asyncpg.create_pool(url, min_size=min_size, max_size=max_size, reset=_keep_session),
            timeout=30,
        )
    except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise StoreError(f"cannot connect to {redact_url(url)}: {exc}") from None
    except ValueError as exc:  # a malformed URL
        raise StoreError(f"not a usable PostgreSQL URL {redact_url(url)!r}: {exc}") from None
    try:
        async with pool.acquire() as conn:
            await apply_pg_migrations(conn, now=clock)
            await conn.reset()  # its advisory lock, whatever happened
    except BaseException as exc:
        await pool.close()
        if isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError):
            raise StoreError(f"cannot migrate {redact_url(url)}: {exc}") from exc
        raise
    store = PostgresStore(
        pool,
        url,
        key_dir=key_dir or default_key_dir(url),
        models=default_models() if models is None else models,
        clock=clock,
        new_id=new_id or new_record_id,
    )
    try:
        await store.adopt_key_files()
        await store.refresh_fingerprints()
    except BaseException:
        await store.close()
        raise
    return store
