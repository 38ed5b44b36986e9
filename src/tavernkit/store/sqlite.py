"""The embedded store: SQLite (the standard library's ``sqlite3`` on a thread of its own,
:mod:`tavernkit.store.sqlite_thread`), with hand-written SQL.

Why not SQLAlchemy 2 Core (async): the schema is a dozen small tables, the queries are simple
and the hot ones (append a message, stream into a swipe) must stay one or two statements we can
see and count; SQLAlchemy would add a large dependency whose abstraction we would mostly route
around. The
portability SQLAlchemy offers lives a level up instead: callers use the :class:`Store` protocol,
and a PostgreSQL store will be a sibling module (asyncpg, its own SQL) behind the same protocol.

The database runs in WAL mode (readers never block the writer, and a crash mid-write loses
nothing committed) with foreign keys on (deleting a chat deletes its messages and swipes,
deleting a record its blobs and links). Migrations: :mod:`tavernkit.store.migrations`.

This module opens the store and holds the documents and a turn's start; the rest is in parts
the class is made of (``_sqlite_*``: chats, swipes, keys, a record's blobs and links, an owner's
settings and global variables...).
"""

from __future__ import annotations

import builtins
import hashlib
import json
import sqlite3
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self, cast

from pydantic import BaseModel

from tavernkit.errors import Conflict, NotFound, StoreError
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.store._lorebook_rows import BOOK_KIND, split_book
from tavernkit.store._message_rows import dumps
from tavernkit.store._sqlite_accounts import SqliteAccounts
from tavernkit.store._sqlite_base import CallsNow, WriteStats, run_now, to_json_doc
from tavernkit.store._sqlite_keys import SqliteKeys
from tavernkit.store._sqlite_links import SqliteBlobsAndLinks
from tavernkit.store._sqlite_listing import SqliteListing
from tavernkit.store._sqlite_members import SqliteRecordMembers
from tavernkit.store._sqlite_search import SqliteSearch
from tavernkit.store._sqlite_settings import SqliteSettings
from tavernkit.store._sqlite_tree import SqliteTree
from tavernkit.store._sqlite_vectors import SqliteVectors
from tavernkit.store.chat_types import StoredChatWindow, TurnStart
from tavernkit.store.migrations import apply_migrations
from tavernkit.store.paths import default_db_path, ensure_private_file
from tavernkit.store.record_types import (
    UNIQUE_NAME_KINDS,
    ModelRegistry,
    RecordInfo,
    RecordRef,
    SharedRecord,
    StoredRecord,
)
from tavernkit.store.registry import default_models
from tavernkit.store.secret_key import SecretKeySource
from tavernkit.store.sqlite_thread import SqliteConnection
from tavernkit.store.sqlite_thread import connect as connect_sqlite

__all__ = ["SqliteStore", "WriteStats", "open_store"]

#: the longest list :meth:`SqliteStore.list` reads on the caller's thread
SHORT_LIST = 64


def _utc_now() -> datetime:
    return datetime.now(UTC)


def new_record_id() -> str:
    """A new row id (what every store uses unless a test pins ``new_id``)."""
    return uuid.uuid4().hex


def _record_name(data: Mapping[str, Any]) -> str | None:
    """A record's own name: ``name``, else a card's ``data.name``."""
    name = data.get("name")
    if not (isinstance(name, str) and name):
        inner = data.get("data")
        name = inner.get("name") if isinstance(inner, Mapping) else None
    return name if isinstance(name, str) and name else None


async def open_store(
    path: Path | str | None = None,
    *,
    models: ModelRegistry | None = None,
    clock: Callable[[], datetime] = _utc_now,
    new_id: Callable[[], str] = new_record_id,
    secret_keys: SecretKeySource | None = None,
) -> SqliteStore:
    """Open (creating and migrating as needed) the database at ``path``, by default
    ``tavernkit.db`` in the data dir. ``models`` maps kinds to the classes ``get`` validates
    with (default: :func:`~tavernkit.store.registry.default_models`); ``clock`` and ``new_id``
    are injectable so tests can pin them; ``secret_keys`` is the key API key secrets are
    sealed with (default: the environment's, :mod:`tavernkit.store.secret_key`)."""
    db_path = Path(path) if path is not None else default_db_path()
    ensure_private_file(db_path)
    try:
        conn = await connect_sqlite(db_path, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open database {db_path}: {exc}") from exc
    try:
        async with conn.execute("PRAGMA journal_mode=WAL") as cur:
            row = await cur.fetchone()
        if row is None or str(row[0]).lower() != "wal":
            raise StoreError(f"cannot switch {db_path} to WAL mode")
        await conn.execute("PRAGMA foreign_keys=ON")
        # NORMAL is durable in WAL mode except for the last commits on power loss.
        await conn.execute("PRAGMA synchronous=NORMAL")
        await conn.execute("PRAGMA busy_timeout=5000")
        await apply_migrations(conn, now=clock)
    except BaseException as exc:
        await conn.close()
        if isinstance(exc, sqlite3.Error):
            raise StoreError(f"cannot open database {db_path}: {exc}") from exc
        raise
    store = SqliteStore(
        conn,
        db_path,
        models=default_models() if models is None else models,
        clock=clock,
        new_id=new_id,
    )
    if secret_keys is not None:
        store.use_secret_keys(secret_keys)
    try:
        await store.adopt_key_files()
        await store.refresh_fingerprints()
    except BaseException:
        await store.close()
        raise
    return store


#: Validated models :meth:`SqliteStore.get_shared` keeps (lorebooks, presets, cards...).
_SHARED_MAX = 64
#: refs :meth:`SqliteStore.get_shared_record` remembers between two commits
_BY_REF_MAX = 1024


def _pick_revision(
    rows: Sequence[Any], kind: str, ref: str, owner: str
) -> tuple[str, str, str, str, int] | None:
    """The revision key of the record ``ref`` names among ``rows`` (kind, id, name, created,
    revision): the one with that id, else the one with that name; ``None`` when none does,
    :class:`~tavernkit.errors.Conflict` when several share the name (as a single read)."""
    by_id = [r for r in rows if r[0] == kind and r[1] == ref]
    chosen = by_id or [r for r in rows if r[0] == kind and r[2] == ref]
    if not chosen:
        return None
    if len(chosen) > 1:
        raise Conflict(f"more than one {kind} is named {ref!r}; use its id")
    _, rid, _, created, revision = chosen[0]
    return (owner, kind, str(rid), str(created), int(revision))


class SqliteStore(
    SqliteTree,
    SqliteSearch,
    SqliteAccounts,
    SqliteVectors,
    SqliteKeys,
    SqliteRecordMembers,
    SqliteListing,
    SqliteBlobsAndLinks,
    SqliteSettings,
):
    """The :class:`~tavernkit.store.protocol.Store` on one SQLite file (see the module doc)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._shared: OrderedDict[tuple[str, str, str, str, int], SharedRecord] = OrderedDict()
        #: what get_shared_record answered per (owner, kind, ref) while the file's
        #: ``PRAGMA data_version`` stayed ``_by_ref_version`` (any commit, of any connection
        #: or process, changes it and empties this)
        self._by_ref: dict[tuple[str, str, str], SharedRecord] = {}
        self._by_ref_version: int | None = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def pragma(self, name: str) -> Any:
        """A PRAGMA's current value (``journal_mode``, ``foreign_keys``...), for diagnostics."""
        if not name.replace("_", "").isalnum():
            raise StoreError(f"not a pragma name: {name!r}")
        async with self._read() as db, db.execute(f"PRAGMA {name}") as cur:
            row = await cur.fetchone()
        return None if row is None else row[0]

    # -- document records ---------------------------------------------------------------
    async def put(
        self,
        kind: str,
        record: Mapping[str, Any] | BaseModel,
        *,
        owner: str = DEFAULT_OWNER,
        name: str | None = None,
        id: str | None = None,
        blobs: Mapping[str, bytes] | None = None,
    ) -> RecordRef:
        self._check_kind(kind)
        source = f"<{kind}>"
        data = to_json_doc(record, source=source)
        if not isinstance(record, BaseModel) and kind in self._models:
            self._validate(kind, data, source)  # refuse what could not be loaded back
        name = name or _record_name(data)
        if not name:
            raise StoreError(f"a {kind} needs a name; none given and the record has none")
        name_key = name if kind in UNIQUE_NAME_KINDS else None
        now = self._now()
        async with self._write() as db:
            existing = None
            if id is not None:
                async with db.execute("SELECT owner, kind FROM records WHERE id = ?", (id,)) as cur:
                    existing = await cur.fetchone()
                if existing is not None and tuple(existing) != (owner, kind):
                    raise StoreError(f"id {id!r} belongs to another record")
            rid = id or self._new_id()
            rest, entries = split_book(data) if kind == BOOK_KIND else (data, [])
            if existing is None:
                await db.execute(
                    "INSERT INTO records (id, owner, kind, name, name_key, data, created, updated)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (rid, owner, kind, name, name_key, dumps(rest), now, now),
                )
            else:
                await db.execute(
                    "UPDATE records SET name = ?, name_key = ?, data = ?, updated = ?, "
                    "revision = revision + 1 WHERE id = ?",
                    (name, name_key, dumps(rest), now, rid),
                )
                if kind == BOOK_KIND:
                    await db.execute("DELETE FROM lorebook_entries WHERE record_id = ?", (rid,))
            if entries:
                await db.executemany(
                    "INSERT INTO lorebook_entries (record_id, uid, seq, data) VALUES (?, ?, ?, ?)",
                    [(rid, uid, seq, text) for uid, seq, text in entries],
                )
            for blob, content in (blobs or {}).items():
                await self._put_blob(db, rid, blob, content)
        return RecordRef(kind=kind, id=rid, name=name)

    async def get_record(self, kind: str, ref: str, *, owner: str = DEFAULT_OWNER) -> StoredRecord:
        async with self._read_now() as db:
            info, data = await self._resolve(db, kind, ref, owner)
            data = await self._whole(db, kind, info.id, data, now=True)
        return StoredRecord(info=info, data=json.loads(data))

    async def get(self, kind: str, ref: str, *, owner: str = DEFAULT_OWNER) -> BaseModel:
        rec = await self.get_record(kind, ref, owner=owner)
        return self._validate(kind, rec.data, f"<store {kind} {rec.info.id}>", stored=True)

    async def get_shared(self, kind: str, ref: str, *, owner: str = DEFAULT_OWNER) -> BaseModel:
        return (await self.get_shared_record(kind, ref, owner=owner)).model

    async def get_shared_record(
        self, kind: str, ref: str, *, owner: str = DEFAULT_OWNER
    ) -> SharedRecord:
        # Nothing committed since this ref was last answered: the same answer, with no look at
        # the records. ``PRAGMA data_version`` reads the WAL index's header, no table: a third
        # of the indexed lookup below cold, and every proxied completion names a profile.
        version = self._data_version()
        if version is not None:
            if version != self._by_ref_version or len(self._by_ref) >= _BY_REF_MAX:
                self._by_ref.clear()
                self._by_ref_version = version
            known = self._by_ref.get((owner, kind, ref))
            if known is not None:
                return known
        shared = await self._shared_record(kind, ref, owner)
        if version is not None and version == self._by_ref_version:
            # the version was read first: a commit since then shows on the next call
            self._by_ref[(owner, kind, ref)] = shared
        return shared

    async def _shared_record(self, kind: str, ref: str, owner: str) -> SharedRecord:
        # One small indexed row says whether the model made last time is still the record's:
        # (id, created, revision) changes with every write, and with a delete and re-create.
        # No snapshot, as in get_shared_records: a record written between the two reads is
        # never served again under the key read first (the key moves with every write)
        async with self._read_now(snapshot=False) as db:
            key = await self._revision_key(db, kind, ref, owner)
            hit = self._shared_hit(key)
            if hit is not None:
                return hit
            rows = list(
                await db.execute_fetchall("SELECT data FROM records WHERE id = ?", (key[2],))
            )
            if not rows:  # deleted between the two reads
                raise NotFound(f"no {kind} {ref!r}")
            text = await self._whole(db, kind, key[2], str(rows[0][0]), now=True)
        return self._share(key, text)

    async def get_shared_records(
        self, wanted: Sequence[tuple[str, str]], *, owner: str = DEFAULT_OWNER
    ) -> dict[tuple[str, str], SharedRecord]:
        # One query for every revision key, one more for the records not cached: a turn's
        # presets, templates, card, persona and profile cost two trips, not one or two each.
        wanted = list(dict.fromkeys((k, r) for k, r in wanted if r))
        if not wanted:
            return {}
        for kind, _ in wanted:
            self._check_kind(kind)
        # each ref looked up by id and by name, each on its index (an OR of them read every
        # record of the owner); a row both find is one row
        cols = "SELECT kind, id, name, created, revision FROM records"
        lookups = " UNION ALL ".join(
            [
                f"{cols} WHERE id = ? AND owner = ? AND kind = ? UNION ALL "
                f"{cols} WHERE owner = ? AND kind = ? AND name = ?"
            ]
            * len(wanted)
        )
        params: list[Any] = []
        for kind, ref in wanted:
            params += [ref, owner, kind, owner, kind, ref]
        # no snapshot needed: a record written or deleted between the two reads is already
        # handled below, and a text newer than its key is never served again under that key
        # (the key moves with every write)
        async with self._read_now(snapshot=False) as db:
            rows = list(dict.fromkeys(map(tuple, await db.execute_fetchall(lookups, params))))
            keys = {(kind, ref): _pick_revision(rows, kind, ref, owner) for kind, ref in wanted}
            found: dict[tuple[str, str], SharedRecord] = {}
            missing: dict[str, builtins.list[tuple[str, str]]] = {}
            for asked, key in keys.items():
                if key is None:
                    continue
                hit = self._shared_hit(key)
                if hit is not None:
                    found[asked] = hit
                else:
                    missing.setdefault(key[2], []).append(asked)
            texts: dict[str, str] = {}
            if missing:
                marks = ", ".join("?" * len(missing))
                texts = {
                    str(rid): str(data)
                    for rid, data in await db.execute_fetchall(
                        f"SELECT id, data FROM records WHERE id IN ({marks})", list(missing)
                    )
                }
                for rid, text in list(texts.items()):
                    try:
                        texts[rid] = await self._whole(db, missing[rid][0][0], rid, text, now=True)
                    except NotFound:  # deleted between the reads
                        del texts[rid]
        for rid, asked_for in missing.items():
            if rid not in texts:  # deleted between the two reads
                continue
            for asked in asked_for:
                key = keys[asked]
                assert key is not None
                found[asked] = self._share(key, texts[rid])
        return found

    def _shared_hit(self, key: tuple[str, str, str, str, int]) -> SharedRecord | None:
        hit = self._shared.get(key)
        if hit is not None:
            self._shared.move_to_end(key)
        return hit

    def _share(self, key: tuple[str, str, str, str, int], text: str) -> SharedRecord:
        """The record of revision ``key`` from its stored JSON ``text``, validated, kept."""
        _, kind, rid = key[:3]
        hit = self._shared.get(key)
        if hit is not None:
            return hit
        data = json.loads(text)  # validation reads it and keeps no reference it could edit
        model = self._validate(kind, data, f"<store {kind} {rid}>", stored=True)
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20)
        created = datetime.fromisoformat(key[3])
        shared = SharedRecord(model, data, digest.hexdigest(), id=rid, created=created)
        self._shared[key] = shared
        if len(self._shared) > _SHARED_MAX:
            self._shared.popitem(last=False)
        return shared

    async def _revision_key(
        self, db: SqliteConnection, kind: str, ref: str, owner: str
    ) -> tuple[str, str, str, str, int]:
        row = await self._record_row(db, kind, ref, owner, "id, created, revision")
        rid, created, revision = row
        return (owner, kind, str(rid), str(created), int(revision))

    async def list(self, kind: str, *, owner: str = DEFAULT_OWNER) -> builtins.list[RecordInfo]:
        self._check_kind(kind)
        query = (
            "SELECT kind, id, name, owner, created, updated FROM records "
            "WHERE owner = ? AND kind = ? ORDER BY name, created"
        )
        # Most lists are a few rows (a user's MCP servers, which every turn reads, profiles,
        # personas): read here and now, at most SHORT_LIST rows of them. A trip to the thread
        # waits for the loop to be free: started before a turn's prompt build, it came back
        # only after it. A longer list is read again, whole, on the thread (a list has no
        # bound), in one trip there (a cursor takes three). A store without a read connection
        # (PostgreSQL's pool, already on the loop) reads it once.
        if self._read_conn() is not None:
            async with self._read_now() as db:
                rows = builtins.list(
                    await db.execute_fetchall(query + " LIMIT ?", (owner, kind, SHORT_LIST + 1))
                )
            if len(rows) <= SHORT_LIST:
                return [self._info(r) for r in rows]
        async with self._read(snapshot=False) as db:  # one statement
            rows = builtins.list(await db.execute_fetchall(query, (owner, kind)))
        return [self._info(r) for r in rows]

    async def delete(self, kind: str, ref: str, *, owner: str = DEFAULT_OWNER) -> None:
        async with self._write() as db:
            info, _ = await self._resolve(db, kind, ref, owner)
            await db.execute("DELETE FROM records WHERE id = ?", (info.id,))
        for key in [k for k in self._shared if k[2] == info.id]:
            del self._shared[key]

    # -- a turn's start -------------------------------------------------------------------
    async def load_turn_start(
        self, chat_ref: str, *, last: int, owner: str = DEFAULT_OWNER
    ) -> TurnStart:
        # One call for what would be five, in one snapshot: the statements run back to back over
        # the read connection (the window's helpers over a connection whose calls never wait).
        if last < 1:
            raise StoreError(f"a chat window holds at least one message, not {last}")

        def on_reader(conn: sqlite3.Connection) -> tuple[list[Any], StoredChatWindow, list[Any]]:
            rows = conn.execute("SELECT data FROM settings WHERE owner = ?", (owner,)).fetchall()
            now = cast("SqliteConnection", CallsNow(conn))
            window = run_now(self._window(now, chat_ref, last, owner))
            variables = conn.execute(
                "SELECT name, value FROM global_variables WHERE owner = ? ORDER BY name", (owner,)
            ).fetchall()
            return rows, window, variables

        settings_rows, window, variables = await self._on_reader(on_reader)
        settings = (
            self._validate("settings", json.loads(settings_rows[0][0]), "<store settings>")
            if settings_rows
            else None
        )
        return TurnStart(settings, window, {str(r[0]): json.loads(r[1]) for r in variables})
