"""Restoring a backup (``tavernkit restore BACKUP``) into an empty home or an empty PostgreSQL
database.

The backup is checked first (every file against its manifest: a damaged backup restores
nothing). Its database is then opened from a private temporary copy (opening migrates a backup
an older tavernkit made; the backup itself is never written) and copied row for row into the
target with the copy-data machinery (:func:`~tavernkit.store.admin.copy_store`: one
transaction, the key secrets sealed as they were stored, so the target's processes need the
secret key the backup's were sealed with; a backup of an older version, whose secrets were
files, has them sealed with this process's key as its copy is opened). A target that holds any
row is refused with :class:`~tavernkit.errors.HomeNotEmpty`
before anything is written. Afterwards the target's rows are counted table by table against
the manifest.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from tavernkit.errors import BackupError, HomeNotEmpty
from tavernkit.store.admin import copy_store
from tavernkit.store.backup import DATA_TABLES, KEYS_FOLDER
from tavernkit.store.backup_check import check_backup
from tavernkit.store.backup_manifest import Manifest
from tavernkit.store.paths import DB_FILE_NAME
from tavernkit.store.sqlite import SqliteStore
from tavernkit.store.sqlite import open_store as open_sqlite_store

__all__ = ["restore_backup", "stored_rows"]


async def stored_rows(store: SqliteStore) -> dict[str, int]:
    """Rows of each of the data tables in ``store``."""
    counts: dict[str, int] = {}
    async with store._read() as db:  # the stores' own package
        for table in DATA_TABLES:
            found = list(await db.execute_fetchall(f"SELECT count(*) FROM {table}"))
            counts[table] = int(found[0][0])
    return counts


async def _refuse_unless_empty(target: SqliteStore, where: str) -> None:
    for table, count in (await stored_rows(target)).items():
        if count:
            raise HomeNotEmpty(
                f"{where} already holds data ({count} rows in {table}): "
                "restore into an empty home or database",
                where=where,
                found=f"{count} rows in {table}",
            )


def _private_copy(backup: Path, into: Path) -> Path:
    """The backup's database (and an older version's key folder) copied into ``into``; the
    database's path."""
    shutil.copyfile(backup / DB_FILE_NAME, into / DB_FILE_NAME)
    (into / DB_FILE_NAME).chmod(0o600)
    if (backup / KEYS_FOLDER).is_dir():
        shutil.copytree(backup / KEYS_FOLDER, into / KEYS_FOLDER)
    return into / DB_FILE_NAME


async def restore_backup(backup: Path, target: SqliteStore, *, where: str) -> Manifest:
    """Copy the backup in folder ``backup`` into the open, empty store ``target`` (``where``
    names it in errors); the backup's manifest. Raises
    :class:`~tavernkit.errors.BackupError` for a damaged backup or a restore that does not
    hold every row, :class:`~tavernkit.errors.HomeNotEmpty` for a target that holds data."""
    state = await asyncio.to_thread(check_backup, backup)
    if not state.whole or state.manifest is None:
        raise BackupError(f"{backup} is not a whole backup: {'; '.join(state.problems)}")
    await _refuse_unless_empty(target, where)
    with tempfile.TemporaryDirectory(prefix="tavernkit-restore-") as temp:
        db_path = await asyncio.to_thread(_private_copy, backup, Path(temp))
        # the target's key: an older backup's key files are sealed with it as they move in
        source = await open_sqlite_store(db_path, secret_keys=target.secret_keys)
        try:
            await copy_store(source, target)
        finally:
            await source.close()
    restored = await stored_rows(target)
    for table, count in state.manifest.tables.items():
        if restored.get(table, 0) != count:
            raise BackupError(
                f"the restore holds {restored.get(table, 0)} rows of {table}, the backup {count}"
            )
    return state.manifest
