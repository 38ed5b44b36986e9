"""Looking at backups on disk (``tavernkit backup check``, retention, the server's "last
verified backup"): which are whole, which are damaged, and where a schedule left a gap.

A backup is whole when its manifest reads and every file it lists is there with its size and
SHA-256 (and, holding secrets, is readable by the user alone). A ``.partial-`` folder is a
backup that never finished. Given a schedule's interval (``--every``, else the one the newest
backup recorded), a stretch longer than one and a half intervals between two whole backups, or
between the newest and now, is a gap.
"""

from __future__ import annotations

import itertools
import re
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from tavernkit.errors import BackupError
from tavernkit.store.backup import PARTIAL_PREFIX
from tavernkit.store.backup_manifest import (
    BACKUP_PREFIX,
    MANIFEST_NAME,
    Manifest,
    read_manifest,
    sha256_of,
)

__all__ = [
    "BackupState",
    "CheckReport",
    "Gap",
    "check_backup",
    "check_backups",
    "latest_whole",
    "newest_manifest",
    "parse_interval",
    "prune_backups",
]

#: how late a scheduled backup may be before the stretch counts as a gap
GAP_SLACK = 1.5
_INTERVAL = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_interval(text: str) -> float:
    """Seconds in an interval written ``90``, ``90s``, ``15m``, ``6h`` or ``1d``."""
    found = _INTERVAL.fullmatch(text.lower())
    if found is None or float(found[1]) <= 0:
        raise ValueError(f"not an interval: {text!r} (a positive number and s, m, h or d: 6h)")
    return float(found[1]) * _UNIT_S[found[2]]


@dataclass(frozen=True, slots=True)
class BackupState:
    """One backup folder and what is wrong with it (nothing: it is whole)."""

    path: Path
    manifest: Manifest | None
    problems: tuple[str, ...]

    @property
    def whole(self) -> bool:
        return self.manifest is not None and not self.problems


@dataclass(frozen=True, slots=True)
class Gap:
    """A stretch with no whole backup although the schedule wanted one."""

    start: datetime
    end: datetime


@dataclass(frozen=True, slots=True)
class CheckReport:
    backups: tuple[BackupState, ...]
    gaps: tuple[Gap, ...] = ()
    #: the interval gaps were measured against (``None``: not checked)
    every_s: float | None = None
    problems: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return (
            not self.problems
            and not self.gaps
            and all(b.whole for b in self.backups)
            and any(b.whole for b in self.backups)
        )


def check_backup(folder: Path) -> BackupState:
    """Whether the backup in ``folder`` is whole (see the module docstring)."""
    if folder.name.startswith(PARTIAL_PREFIX):
        return BackupState(folder, None, ("an unfinished backup (no manifest; remove it)",))
    try:
        manifest = read_manifest(folder)
    except BackupError as exc:
        return BackupState(folder, None, (str(exc),))
    problems: list[str] = []
    listed = {f.path for f in manifest.files}
    for entry in manifest.files:
        path = folder / entry.path
        if not path.is_file():
            problems.append(f"{entry.path}: missing")
            continue
        stat = path.stat()
        if stat.st_size != entry.size:
            problems.append(f"{entry.path}: {stat.st_size} bytes, the manifest says {entry.size}")
        elif sha256_of(path) != entry.sha256:
            problems.append(f"{entry.path}: damaged (its SHA-256 differs from the manifest's)")
        if stat.st_mode & 0o077:
            problems.append(f"{entry.path}: readable by others (mode {stat.st_mode & 0o777:o})")
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if path.is_file() and name != MANIFEST_NAME and name not in listed:
            problems.append(f"{name}: not in the manifest")
    return BackupState(folder, manifest, tuple(problems))


def _backup_folders(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.iterdir()
        if p.is_dir() and p.name.startswith((BACKUP_PREFIX, PARTIAL_PREFIX))
    )


def check_backups(folder: Path, *, now: datetime, every_s: float | None = None) -> CheckReport:
    """Check one backup (a folder with a manifest) or every backup in ``folder``, and the gaps
    in their schedule (``every_s``, else the newest whole backup's)."""
    if not folder.is_dir():
        return CheckReport((), problems=(f"{folder}: no such folder",))
    if (folder / MANIFEST_NAME).exists():
        return CheckReport((check_backup(folder),))
    states = tuple(check_backup(p) for p in _backup_folders(folder))
    times = sorted(s.manifest.created for s in states if s.whole and s.manifest is not None)
    problems = () if times else (f"{folder}: no whole backup",)
    if every_s is None:
        newest = latest_whole(states)
        every_s = newest.manifest.every_s if newest and newest.manifest else None
    return CheckReport(states, _gaps(times, now, every_s), every_s, problems)


def _gaps(times: list[datetime], now: datetime, every_s: float | None) -> tuple[Gap, ...]:
    if every_s is None or not times:
        return ()
    allowed = timedelta(seconds=every_s * GAP_SLACK)
    ends = [*times, now]
    return tuple(Gap(a, b) for a, b in itertools.pairwise(ends) if b - a > allowed)


def _whole_newest_first(states: tuple[BackupState, ...] | list[BackupState]) -> list[BackupState]:
    whole = [(s.manifest.created, s) for s in states if s.whole and s.manifest is not None]
    return [s for _, s in sorted(whole, key=lambda pair: pair[0], reverse=True)]


def latest_whole(states: tuple[BackupState, ...] | list[BackupState]) -> BackupState | None:
    """The newest whole backup of ``states`` (``None``: none is whole)."""
    whole = _whole_newest_first(states)
    return whole[0] if whole else None


def prune_backups(folder: Path, keep: int) -> list[Path]:
    """Remove all but the ``keep`` newest whole backups in ``folder`` (damaged and unfinished
    ones are left for a person to look at); the folders removed."""
    if keep < 1:
        raise ValueError("keep at least one backup")
    states = [check_backup(p) for p in _backup_folders(folder)]
    removed = sorted(s.path for s in _whole_newest_first(states)[keep:])
    for path in removed:
        shutil.rmtree(path)
    return removed


def newest_manifest(folder: Path) -> Manifest | None:
    """The manifest of the newest finished backup in ``folder``, read without checking its
    files (cheap: what the server shows as the last verified backup)."""
    if not folder.is_dir():
        return None
    found: list[Manifest] = []
    for path in _backup_folders(folder):
        if path.name.startswith(BACKUP_PREFIX):
            try:
                found.append(read_manifest(path))
            except BackupError:
                continue
    return max(found, key=lambda m: m.created, default=None)
