"""Making a backup of a store (``tavernkit backup``, ``serve --backup-every``): a consistent
snapshot, verified before it counts.

SQLite: a second connection opens one read transaction, counts every table's rows and copies
the database with SQLite's online backup API inside it, so the counts and the copy are the same
state while the server goes on writing (WAL: the writer is never blocked). The API keys'
secrets are in their rows, sealed with the secret key (:mod:`tavernkit.store.secret_key`), and
travel as they are: a backup holds no plaintext key, and restoring it on another host needs the
same secret key. PostgreSQL: the copy-data machinery
(:func:`~tavernkit.store.admin.copy_store`, one REPEATABLE READ transaction) copies the
database into a fresh SQLite file, which is what the backup holds, so every backup has one
shape and restores into either backend.

Verification on write: the copy is reopened read-only, must pass ``PRAGMA integrity_check``
and hold the rows counted in the source table by table, and every key row must hold its sealed
secret; only then is the manifest (files, sizes, SHA-256) written and the folder renamed from
``.partial-<name>`` to its name. A backup that fails leaves nothing that looks like one.

The file work runs in a worker thread: a server's event loop goes on serving meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from tavernkit.errors import BackupError, StoreError
from tavernkit.store.admin import COPIED_TABLES, applied_migrations, copy_store
from tavernkit.store.backup_manifest import (
    MANIFEST_NAME,
    BackupFile,
    Manifest,
    backup_name,
    sha256_of,
    write_private,
)
from tavernkit.store.key_files import key_dir_for
from tavernkit.store.paths import DB_FILE_NAME
from tavernkit.store.postgres import PostgresStore
from tavernkit.store.sqlite import SqliteStore
from tavernkit.store.sqlite import open_store as open_sqlite_store

__all__ = ["DATA_TABLES", "PARTIAL_PREFIX", "count_rows", "make_backup"]

#: the tables a backup counts and a restore compares (every table of the data; the search
#: index and the storage counters are rebuilt from them by triggers)
DATA_TABLES: tuple[str, ...] = tuple(table for table, _, _ in COPIED_TABLES)
#: a backup being written (renamed to its name once verified)
PARTIAL_PREFIX = ".partial-"
#: where backups of older versions kept the key secrets (a restore still reads them)
KEYS_FOLDER = key_dir_for(DB_FILE_NAME).name


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _tavernkit_version() -> str:
    try:
        return version("tavernkit")
    except PackageNotFoundError:
        return "unknown"


def count_rows(db: sqlite3.Connection) -> dict[str, int]:
    """Rows of each of :data:`DATA_TABLES` in ``db`` (a table an older schema lacks: 0)."""
    present = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    return {
        table: int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        if table in present
        else 0
        for table in DATA_TABLES
    }


def _new_database_file(path: Path) -> sqlite3.Connection:
    write_private(path, b"")  # 0600 before SQLite writes a byte (an empty file is a new database)
    return sqlite3.connect(path, isolation_level=None)


def _snapshot_sqlite(db_path: Path, work: Path) -> tuple[dict[str, int], list[str]]:
    """Copy the database at ``db_path`` into ``work`` from one read transaction; the rows
    counted in it and its migrations."""
    source = sqlite3.connect(db_path, isolation_level=None, timeout=30)
    try:
        source.execute("BEGIN")  # one snapshot: the counts and the copy agree
        counts = count_rows(source)
        migrations = [str(r[0]) for r in source.execute("SELECT name FROM _migrations ORDER BY 1")]
        copy = _new_database_file(work / DB_FILE_NAME)
        try:
            source.backup(copy)
            # one self-contained file: no -wal beside it to lose
            copy.execute("PRAGMA journal_mode=DELETE")
        finally:
            copy.close()
        source.execute("COMMIT")
    finally:
        source.close()
    return counts, migrations


async def _snapshot_postgres(store: PostgresStore, work: Path) -> tuple[dict[str, int], list[str]]:
    copy = await open_sqlite_store(work / DB_FILE_NAME)
    try:
        report = await copy_store(store, copy)
    finally:
        await copy.close()
    await asyncio.to_thread(_settle_copy, work / DB_FILE_NAME)
    migrations = [name for name, _ in await applied_migrations(store)]
    return dict(report.rows), migrations


def _settle_copy(path: Path) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=DELETE")
    finally:
        db.close()


def _verify_copy(work: Path, expected: dict[str, int]) -> str:
    """Reopen the copy read-only: its integrity, its rows table by table, every key's sealed
    secret.
    Returns SQLite's integrity answer (``ok``)."""
    db = sqlite3.connect(f"file:{work / DB_FILE_NAME}?mode=ro", uri=True, isolation_level=None)
    try:
        integrity = [str(r[0]) for r in db.execute("PRAGMA integrity_check")]
        if integrity != ["ok"]:
            raise BackupError(f"the copy fails its integrity check: {'; '.join(integrity[:5])}")
        found = count_rows(db)
        unsealed = int(db.execute("SELECT count(*) FROM api_keys WHERE secret = ''").fetchone()[0])
    finally:
        db.close()
    for table in DATA_TABLES:
        if found[table] != expected.get(table, 0):
            raise BackupError(
                f"the copy holds {found[table]} rows of {table}, the source "
                f"{expected.get(table, 0)}"
            )
    if unsealed:
        raise BackupError(
            f"{unsealed} API keys have no secret in the database (kept in files that are gone?): "
            "the backup would hold keys that cannot be used; add them again or delete them"
        )
    return integrity[0]


def _describe_files(work: Path) -> tuple[BackupFile, ...]:
    files = sorted(p for p in work.rglob("*") if p.is_file() and p.name != MANIFEST_NAME)
    return tuple(
        BackupFile(p.relative_to(work).as_posix(), p.stat().st_size, sha256_of(p)) for p in files
    )


def _finish(work: Path, final: Path, manifest: Manifest) -> None:
    write_private(work / MANIFEST_NAME, manifest.to_json())
    work.rename(final)


async def make_backup(
    store: SqliteStore,
    into: Path,
    *,
    now: Callable[[], datetime] = _utc_now,
    every_s: float | None = None,
) -> tuple[Path, Manifest]:
    """Back ``store`` up into a new folder in ``into`` (made 0700 when missing); the folder and
    its manifest. ``every_s``: the schedule's interval, recorded for the gap check. Raises
    :class:`~tavernkit.errors.BackupError` when the backup cannot be made or fails its
    verification (then nothing of it is left)."""
    created = now().astimezone(UTC)
    final = into / backup_name(created)
    work = into / (PARTIAL_PREFIX + final.name)
    try:
        into.mkdir(parents=True, exist_ok=True, mode=0o700)
        work.mkdir(mode=0o700)
    except OSError as exc:
        raise BackupError(f"cannot write a backup into {into}: {exc.strerror or exc}") from None
    try:
        if isinstance(store, PostgresStore):
            backend = "postgresql"
            counts, migrations = await _snapshot_postgres(store, work)
        else:
            backend = "sqlite"
            counts, migrations = await asyncio.to_thread(_snapshot_sqlite, store.path, work)
        integrity = await asyncio.to_thread(_verify_copy, work, counts)
        manifest = Manifest(
            created=created,
            tavernkit_version=_tavernkit_version(),
            backend=backend,
            migrations=tuple(migrations),
            tables=counts,
            files=await asyncio.to_thread(_describe_files, work),
            every_s=every_s,
            verified={"integrity": integrity, "at": now().astimezone(UTC).isoformat()},
        )
        await asyncio.to_thread(_finish, work, final, manifest)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            shutil.rmtree(work)
        if isinstance(exc, OSError):
            raise BackupError(f"cannot write the backup {final}: {exc}") from None
        if isinstance(exc, sqlite3.Error):
            raise BackupError(f"cannot copy the database into {final}: {exc}") from None
        if isinstance(exc, StoreError) and not isinstance(exc, BackupError):
            raise BackupError(f"cannot back up the store: {exc}") from exc
        raise
    return final, manifest
