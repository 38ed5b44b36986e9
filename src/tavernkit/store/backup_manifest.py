"""A backup's manifest (``manifest.json``): what a backup folder holds and how to tell it is
whole.

A backup is a folder ``tavernkit-backup-<UTC time>`` holding a home as the SQLite store keeps
it (``tavernkit.db``, 0600, the API keys' secrets sealed inside as they were stored; a backup
of an older version also has the key folder ``tavernkit.db.keys/``) and this manifest, written
last: a folder without one is a backup that never finished. The manifest lists every file
with its size and SHA-256, the schema (the migrations the database has), the rows of each
table, when it was made and by which tavernkit, which backend it came from and, for a scheduled
backup, how often the schedule runs (so a check can find the gaps in it).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tavernkit.errors import BackupError

__all__ = [
    "BACKUP_PREFIX",
    "FORMAT",
    "MANIFEST_NAME",
    "BackupFile",
    "Manifest",
    "backup_name",
    "read_manifest",
    "sha256_of",
    "write_private",
]

MANIFEST_NAME = "manifest.json"
BACKUP_PREFIX = "tavernkit-backup-"
FORMAT = "tavernkit-backup/1"
_TIME_FORMAT = "%Y%m%dT%H%M%S.%fZ"


def backup_name(created: datetime) -> str:
    """The folder name of a backup made at ``created`` (sorts in time order)."""
    return BACKUP_PREFIX + created.astimezone(UTC).strftime(_TIME_FORMAT)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file readable by the user alone (0600 whatever the umask),
    flushed to disk."""
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    path.chmod(0o600)


@dataclass(frozen=True, slots=True)
class BackupFile:
    """One file of a backup: its path inside the folder (``/``-separated), size and hash."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Manifest:
    created: datetime
    tavernkit_version: str
    #: where the data came from: ``sqlite`` or ``postgresql``
    backend: str
    #: the migrations the backed-up database has, in order (its schema version is the last)
    migrations: tuple[str, ...]
    #: rows of each table, as read from the source and found again in the copy
    tables: dict[str, int]
    files: tuple[BackupFile, ...]
    #: seconds between the backups of the schedule that made it (``None``: made by hand)
    every_s: float | None = None
    #: what the verification on write checked (``integrity``: SQLite's answer)
    verified: dict[str, Any] = field(default_factory=dict)

    @property
    def schema_version(self) -> str:
        return self.migrations[-1] if self.migrations else ""

    def to_json(self) -> bytes:
        body = asdict(self)
        body["created"] = self.created.astimezone(UTC).isoformat()
        body["schema_version"] = self.schema_version
        body["format"] = FORMAT
        return json.dumps(body, indent=2, sort_keys=True).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes, *, source: str) -> Manifest:
        try:
            body = json.loads(raw)
            if body.get("format") != FORMAT:
                raise BackupError(f"{source}: not a tavernkit backup manifest ({FORMAT})")
            return cls(
                created=datetime.fromisoformat(body["created"]),
                tavernkit_version=str(body["tavernkit_version"]),
                backend=str(body["backend"]),
                migrations=tuple(str(m) for m in body["migrations"]),
                tables={str(k): int(v) for k, v in body["tables"].items()},
                files=tuple(
                    BackupFile(str(f["path"]), int(f["size"]), str(f["sha256"]))
                    for f in body["files"]
                ),
                every_s=None if body.get("every_s") is None else float(body["every_s"]),
                verified=dict(body.get("verified") or {}),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BackupError(f"{source}: the manifest cannot be read ({exc})") from None


def read_manifest(folder: Path) -> Manifest:
    """The manifest of the backup in ``folder``; :class:`BackupError` when it is missing or
    unreadable."""
    path = folder / MANIFEST_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BackupError(f"{folder}: no {MANIFEST_NAME} (an unfinished backup?)") from None
    except OSError as exc:
        raise BackupError(f"{folder}: cannot read {MANIFEST_NAME}: {exc}") from None
    return Manifest.from_json(raw, source=str(path))
