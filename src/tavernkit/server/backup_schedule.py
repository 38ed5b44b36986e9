"""Scheduled backups in ``tavernkit serve`` (``--backup-every 6h --backup-dir DIR
--backup-keep N``): a task on the server's loop that sleeps until a backup is due, makes one
(:func:`~tavernkit.store.backup.make_backup`: the copying, hashing and checking run in a
worker thread, so requests are served meanwhile), then keeps the newest N.

The first backup is due one interval after the newest one already in the folder (at once when
there is none or it is older), so a server restarted often still backs up on schedule. A
backup that fails is logged and remembered (``last_error``); the next one is tried at the next
interval. Stopping the server waits for a backup in progress to finish rather than leave half
of one. :attr:`BackupSchedule.last` is what ``GET /backups/latest`` shows.

Several processes over one PostgreSQL database each run their own schedule when each is given
one: give ``--backup-every`` to one of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tavernkit.errors import ServerConfigError, TavernKitError
from tavernkit.facade import Tavern
from tavernkit.server.settings import ServerSettings
from tavernkit.store.backup import make_backup
from tavernkit.store.backup_check import newest_manifest, prune_backups
from tavernkit.store.backup_manifest import Manifest
from tavernkit.store.sqlite import SqliteStore

__all__ = ["BackupSchedule", "backup_folder", "start_backups"]

log = logging.getLogger(__name__)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class BackupSchedule:
    """Backups of ``store`` into ``folder`` every ``every_s`` seconds (see the module
    docstring)."""

    def __init__(
        self,
        store: SqliteStore,
        folder: Path,
        *,
        every_s: float,
        keep: int | None = None,
        now: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.store = store
        self.folder = folder
        self.every_s = every_s
        self.keep = keep
        self._now = now
        #: the manifest of the last verified backup (this process's, or found at start)
        self.last: Manifest | None = None
        #: why the last attempt failed (``None``: it did not)
        self.last_error: str | None = None
        self.next_at: datetime | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.last = await asyncio.to_thread(newest_manifest, self.folder)
        self._task = asyncio.create_task(self._run(), name="tavernkit-backups")

    async def close(self) -> None:
        """Stop the schedule (a backup in progress finishes first)."""
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _first_due(self) -> datetime:
        now = self._now()
        if self.last is None:
            return now
        return max(now, self.last.created + timedelta(seconds=self.every_s))

    async def _run(self) -> None:
        self.next_at = self._first_due()
        while not self._stop.is_set():
            wait = max(0.0, (self.next_at - self._now()).total_seconds())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=wait)
            if self._stop.is_set():
                return
            await self.run_once()
            self.next_at = self._now() + timedelta(seconds=self.every_s)

    async def run_once(self) -> Manifest | None:
        """Make one backup now, then apply the retention; its manifest (``None``: it failed)."""
        try:
            made, manifest = await make_backup(
                self.store, self.folder, now=self._now, every_s=self.every_s
            )
            if self.keep is not None:
                await asyncio.to_thread(prune_backups, self.folder, self.keep)
        except (TavernKitError, OSError) as exc:
            self.last_error = str(exc)
            log.error("scheduled backup failed: %s", exc)
            return None
        self.last, self.last_error = manifest, None
        log.info("backed up and verified: %s", made)
        return manifest


def backup_folder(settings: ServerSettings, tavern: Tavern) -> Path:
    """Where the server's backups go: ``settings.backup_dir``, else ``backups/`` in the home
    (where ``tavernkit backup`` puts them too)."""
    return settings.backup_dir if settings.backup_dir is not None else tavern.home / "backups"


async def start_backups(
    settings: ServerSettings, tavern: Tavern, exit_stack: contextlib.AsyncExitStack
) -> BackupSchedule | None:
    """The server's schedule when ``settings.backup_every_s`` asks for one, started (and
    stopped by ``exit_stack``); ``None`` otherwise."""
    if settings.backup_every_s is None:
        return None
    store = tavern.store
    if not isinstance(store, SqliteStore):  # both backends are; a plugin's store may not be
        raise ServerConfigError(f"scheduled backups cannot copy a {type(store).__name__}")
    schedule = BackupSchedule(
        store,
        backup_folder(settings, tavern),
        every_s=settings.backup_every_s,
        keep=settings.backup_keep,
    )
    await schedule.start()
    exit_stack.push_async_callback(schedule.close)
    return schedule
