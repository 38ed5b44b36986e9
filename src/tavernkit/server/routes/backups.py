"""``GET /backups/latest``: when the last verified backup of the server's data was made (the
web UI's settings show it). The server's schedule answers when there is one
(``serve --backup-every``); otherwise the newest backup in the backup folder (``backups/`` in
the home, where ``tavernkit backup`` puts them) is read from its manifest.

Any signed-in user may ask (the backup holds their data too); why a backup failed, which names
the server's folders, is told to admins only."""

from __future__ import annotations

import asyncio
from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel

from tavernkit.server.auth import CurrentPrincipal
from tavernkit.server.backup_schedule import backup_folder
from tavernkit.server.routes._common import State
from tavernkit.store.backup_check import newest_manifest
from tavernkit.store.backup_manifest import Manifest

__all__ = ["router"]

router = APIRouter(prefix="/backups", tags=["backups"])


class LastBackup(BaseModel):
    created: datetime
    #: verified on write: reopened, integrity checked, rows counted against the source
    verified: bool
    files: int
    bytes: int
    schema_version: str
    tavernkit_version: str


class BackupStatus(BaseModel):
    #: the server backs up on a schedule (``serve --backup-every``)
    scheduled: bool
    every_s: float | None = None
    next_at: datetime | None = None
    last: LastBackup | None = None
    #: why the last scheduled backup failed (admins only; ``None``: it did not)
    last_error: str | None = None


def _last(manifest: Manifest | None) -> LastBackup | None:
    if manifest is None:
        return None
    return LastBackup(
        created=manifest.created,
        verified=manifest.verified.get("integrity") == "ok",
        files=len(manifest.files),
        bytes=sum(f.size for f in manifest.files),
        schema_version=manifest.schema_version,
        tavernkit_version=manifest.tavernkit_version,
    )


@router.get("/latest")
async def latest_backup(state: State, principal: CurrentPrincipal) -> BackupStatus:
    schedule = state.backups
    if schedule is None:
        folder = backup_folder(state.settings, state.tavern)
        return BackupStatus(
            scheduled=False, last=_last(await asyncio.to_thread(newest_manifest, folder))
        )
    return BackupStatus(
        scheduled=True,
        every_s=schedule.every_s,
        next_at=schedule.next_at,
        last=_last(schedule.last),
        last_error=schedule.last_error if principal.is_admin else None,
    )
