"""``tavernkit backup`` (make one, verified, with ``--keep N`` retention), ``tavernkit backup
check DIR`` (damaged or unfinished backups, gaps in a schedule) and ``tavernkit restore
BACKUP`` (into an empty home or database). The work is :mod:`tavernkit.store.backup`'s,
:mod:`~tavernkit.store.backup_check`'s and :mod:`~tavernkit.store.restore`'s."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from tavernkit.cli._common import HomeOption, fail
from tavernkit.cli.error_text import error_text
from tavernkit.errors import TavernKitError
from tavernkit.store.backends import open_store
from tavernkit.store.backup import make_backup
from tavernkit.store.backup_check import (
    BackupState,
    CheckReport,
    check_backups,
    parse_interval,
    prune_backups,
)
from tavernkit.store.backup_manifest import Manifest
from tavernkit.store.paths import DB_FILE_NAME, data_dir
from tavernkit.store.postgres import is_postgres_url, redact_url
from tavernkit.store.protocol import Store
from tavernkit.store.restore import restore_backup
from tavernkit.store.sqlite import SqliteStore

__all__ = ["backup_app", "default_backup_dir", "restore_command"]

out = Console(highlight=False)

backup_app = typer.Typer(
    help="Back the home's data up (verified), check backups, keep the newest N.",
    invoke_without_command=True,
)

DatabaseOption = Annotated[
    str | None,
    typer.Option(
        "--database",
        envvar="TAVERNKIT_DATABASE_URL",
        help="A postgresql:// URL (default: the home's SQLite file).",
    ),
]


def default_backup_dir(home: Path) -> Path:
    """Where backups go unless told: ``backups/`` in the home."""
    return home / "backups"


async def _open(database: str | None, home: Path) -> SqliteStore:
    if database is not None and not is_postgres_url(database):
        raise typer.BadParameter(f"not a PostgreSQL URL: {redact_url(database)!r}")
    target: Store = await open_store(database if database is not None else home / DB_FILE_NAME)
    assert isinstance(target, SqliteStore)  # both backends are (PostgresStore subclasses it)
    return target


def _size(total: int) -> str:
    return f"{total / 1024:.1f} KiB" if total < 1024 * 1024 else f"{total / 1024 / 1024:.1f} MiB"


def _summary(manifest: Manifest) -> str:
    rows = sum(manifest.tables.values())
    size = sum(f.size for f in manifest.files)
    return (
        f"{len(manifest.files)} files, {_size(size)}, {rows} rows, "
        f"schema {manifest.schema_version}, made {manifest.created:%Y-%m-%d %H:%M:%S} UTC"
    )


@backup_app.callback()
def backup(
    ctx: typer.Context,
    to: Annotated[
        Path | None, typer.Option("--to", help="Folder of backups (default: HOME/backups).")
    ] = None,
    keep: Annotated[
        int | None,
        typer.Option("--keep", min=1, help="Then remove all but the newest N whole backups."),
    ] = None,
    database: DatabaseOption = None,
    home: HomeOption = None,
) -> None:
    """Make a verified backup of the home's data (or a PostgreSQL database's) into a new
    folder: the database, the API keys' secrets as stored (0600) and a manifest with hashes."""
    if ctx.invoked_subcommand is not None:
        return
    folder = home if home is not None else data_dir()
    into = to if to is not None else default_backup_dir(folder)

    async def run() -> tuple[Path, Manifest, list[Path]]:
        store = await _open(database, folder)
        try:
            made, manifest = await make_backup(store, into)
        finally:
            await store.close()
        removed = prune_backups(into, keep) if keep is not None else []
        return made, manifest, removed

    try:
        made, manifest, removed = asyncio.run(run())
    except TavernKitError as exc:
        raise fail(error_text(exc)) from None
    out.print(f"backed up and verified: {escape(str(made))}")
    out.print(f"  {escape(_summary(manifest))}")
    for path in removed:
        out.print(f"  removed (over --keep {keep}): {escape(path.name)}")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _print_state(state: BackupState) -> None:
    if state.whole and state.manifest is not None:
        out.print(f"ok       {escape(state.path.name)}  {escape(_summary(state.manifest))}")
        return
    out.print(f"[bold red]DAMAGED[/]  {escape(state.path.name)}")
    for problem in state.problems:
        out.print(f"           {escape(problem)}")


def _print_report(report: CheckReport) -> None:
    for state in report.backups:
        _print_state(state)
    for problem in report.problems:
        out.print(f"[bold red]MISSING[/]  {escape(problem)}")
    for gap in report.gaps:
        long = _duration((gap.end - gap.start).total_seconds())
        out.print(
            f"[bold red]GAP[/]      no backup from {gap.start:%Y-%m-%d %H:%M:%S} to "
            f"{gap.end:%Y-%m-%d %H:%M:%S} UTC ({long}; the schedule: every "
            f"{_duration(report.every_s or 0)})"
        )
    if report.every_s is None and len(report.backups) > 1:
        out.print("(no schedule known: give --every to look for gaps)")


@backup_app.command("check")
def check(
    folder: Annotated[Path, typer.Argument(help="A backup, or a folder of backups.")],
    every: Annotated[
        str | None,
        typer.Option("--every", help="The schedule (6h, 30m, 1d): report the gaps in it."),
    ] = None,
) -> None:
    """Check backups: files missing or damaged (size, SHA-256), unfinished backups, and gaps
    in the schedule. Exits 1 when anything is wrong."""
    try:
        every_s = parse_interval(every) if every is not None else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--every") from None
    report = check_backups(folder, now=datetime.now(UTC), every_s=every_s)
    _print_report(report)
    if not report.ok:
        raise typer.Exit(1)


def restore_command(
    backup: Annotated[Path, typer.Argument(help="The backup folder to restore.")],
    database: DatabaseOption = None,
    home: HomeOption = None,
) -> None:
    """Restore a backup into an empty home (or an empty PostgreSQL database).

    With --database, into that PostgreSQL database; a home or database that holds data is
    refused."""
    folder = home if home is not None else data_dir()
    where = redact_url(database) if database is not None else str(folder)

    async def run() -> Manifest:
        store = await _open(database, folder)
        try:
            return await restore_backup(backup, store, where=where)
        finally:
            await store.close()

    try:
        manifest = asyncio.run(run())
    except TavernKitError as exc:
        raise fail(error_text(exc)) from None
    out.print(f"restored {escape(backup.name)} into {escape(where)}")
    out.print(f"  {escape(_summary(manifest))}")
