"""``tavernkit migrate``, ``tavernkit copy-data`` and ``tavernkit rotate-secret-key``: bring a
database's schema up to date, move a home's data between the embedded SQLite file and a
PostgreSQL database, and seal its API keys under a new secret key.

Plain functions: :mod:`tavernkit.cli` registers them by name and imports this module only when
one of them runs."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from tavernkit.cli._common import HomeOption, fail
from tavernkit.cli.error_text import error_text
from tavernkit.errors import SecretKeyError, TavernKitError
from tavernkit.store.admin import applied_migrations, copy_store
from tavernkit.store.paths import DB_FILE_NAME, data_dir
from tavernkit.store.postgres import (
    is_postgres_url,
    open_postgres_store,
    redact_url,
)
from tavernkit.store.secret_key import (
    PREVIOUS_SECRET_KEY_ENV,
    PREVIOUS_SECRET_KEY_FILE_ENV,
    SECRET_KEY_ENV,
    SECRET_KEY_FILE_ENV,
    check_secret_key_settings,
    read_secret_key_file,
    replace_generated_key,
)
from tavernkit.store.sqlite import SqliteStore
from tavernkit.store.sqlite import open_store as open_sqlite_store

__all__ = ["copy_data", "migrate", "rotate_secret_key"]

out = Console(highlight=False)

DatabaseOption = Annotated[
    str | None,
    typer.Option(
        "--database",
        envvar="TAVERNKIT_DATABASE_URL",
        help="A postgresql:// URL (default: the home's SQLite file).",
    ),
]


def _home(home: Path | None) -> Path:
    return home if home is not None else data_dir()


async def _open(database: str | None, home: Path) -> SqliteStore:
    if database is None:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        return await open_sqlite_store(home / DB_FILE_NAME)
    if not is_postgres_url(database):
        raise typer.BadParameter(
            f"not a PostgreSQL URL: {redact_url(database)!r} (postgresql://user@host:port/db)"
        )
    return await open_postgres_store(database)


def _where(database: str | None, home: Path) -> str:
    return redact_url(database) if database is not None else str(home / DB_FILE_NAME)


def migrate(database: DatabaseOption = None, home: HomeOption = None) -> None:
    """Create or update a database's tables (the server and the CLI also do it on open)."""
    folder = _home(home)

    async def run() -> list[tuple[str, str]]:
        store = await _open(database, folder)
        try:
            return await applied_migrations(store)
        finally:
            await store.close()

    try:
        applied = asyncio.run(run())
    except TavernKitError as exc:
        raise fail(error_text(exc)) from None
    out.print(f"{escape(_where(database, folder))}: up to date")
    for name, when in applied:
        out.print(f"  {escape(name)}  (applied {escape(when)})")


def copy_data(
    to: Annotated[
        str | None, typer.Option("--to", help="Copy the home's data into this database URL.")
    ] = None,
    from_: Annotated[
        str | None,
        typer.Option("--from", help="Copy this database URL's data into the home (empty)."),
    ] = None,
    home: HomeOption = None,
) -> None:
    """Copy everything between the home's SQLite file and an empty PostgreSQL database.

    ``--to URL`` copies the home into the database, ``--from URL`` the database into an empty
    home: records, chats, settings, memory's vectors, API keys and their secrets, row for
    row."""
    if (to is None) == (from_ is None):
        raise fail("give exactly one of --to URL or --from URL")
    folder = _home(home)
    source_at, target_at = (None, to) if to is not None else (from_, None)

    async def run() -> dict[str, int]:
        source = await _open(source_at, folder)
        try:
            target = await _open(target_at, folder)
            try:
                report = await copy_store(source, target)
            finally:
                await target.close()
        finally:
            await source.close()
        return {**report.rows, "key secrets": report.secrets}

    try:
        counts = asyncio.run(run())
    except TavernKitError as exc:
        raise fail(error_text(exc)) from None
    out.print(f"copied {escape(_where(source_at, folder))} -> {escape(_where(target_at, folder))}")
    for what, count in counts.items():
        out.print(f"  {escape(what)}: {count}")


def rotate_secret_key(
    new_key_file: Annotated[
        Path | None,
        typer.Option(
            "--new-key-file",
            help="A file holding the new secret key (at least 32 characters; "
            "openssl rand -base64 32 > FILE makes one). Without it: seal again under the "
            "current key what the previous key sealed (a rolling rotation).",
        ),
    ] = None,
    secret_key_file: Annotated[
        Path | None,
        typer.Option(
            "--secret-key-file",
            envvar=SECRET_KEY_FILE_ENV,
            help=f"A file holding the current secret key (or ${SECRET_KEY_ENV}; default: this "
            "host's, in the data dir).",
        ),
    ] = None,
    previous_secret_key_file: Annotated[
        Path | None,
        typer.Option(
            "--previous-secret-key-file",
            envvar=PREVIOUS_SECRET_KEY_FILE_ENV,
            help="A file holding the previous secret key (or "
            f"${PREVIOUS_SECRET_KEY_ENV}): secrets it sealed are sealed again.",
        ),
    ] = None,
    database: DatabaseOption = None,
    home: HomeOption = None,
) -> None:
    """Seal the stored API keys under a new secret key.

    With --new-key-file: every stored secret, opened with the current (or previous) key, is
    sealed under the new key; then give every process the new key and restart them (a single
    host's generated key file is replaced by the new key). Without it, for a rolling rotation
    (docs/deployment.md): once every process runs with the new key as current and the old one
    as previous, what the previous key sealed is sealed under the current one. A key that
    opens none of them changes nothing."""
    folder = _home(home)
    if secret_key_file is not None:
        os.environ[SECRET_KEY_FILE_ENV] = str(secret_key_file)
    if previous_secret_key_file is not None:
        os.environ[PREVIOUS_SECRET_KEY_FILE_ENV] = str(previous_secret_key_file)
    try:
        count, replaced = asyncio.run(_rotate(new_key_file, database, folder))
    except TavernKitError as exc:
        raise fail(error_text(exc)) from None
    _say_rotated(escape(_where(database, folder)), count, new_key_file is None, replaced)


async def _rotate(
    new_key_file: Path | None, database: str | None, folder: Path
) -> tuple[int, bool]:
    """Seal again (under ``new_key_file``'s key, else the current one); the count, and
    whether this host's generated key file was replaced by the new key."""
    check_secret_key_settings()
    new = read_secret_key_file(new_key_file) if new_key_file is not None else None
    store = await _open(database, folder)
    try:
        if new is None and store.secret_keys.previous() is None:
            raise SecretKeyError(
                "nothing to rotate to: give --new-key-file, or the previous key "
                f"(--previous-secret-key-file or {PREVIOUS_SECRET_KEY_ENV}) beside the "
                "new current one"
            )
        old = store.secret_keys.current()
        count = await store.rotate_secret_key(new)
    finally:
        await store.close()
    if new_key_file is not None and old.generated_file is not None:
        replace_generated_key(old, new_key_file.read_text(encoding="utf-8"))
        return count, True
    return count, False


def _say_rotated(where: str, count: int, rolling: bool, replaced: bool) -> None:
    if rolling:
        out.print(f"{where}: {count} sealed secrets now under the current key")
        out.print("every process may now drop its previous key (restart them one by one)")
        return
    out.print(f"{where}: {count} sealed secrets now under the new key")
    if replaced:
        out.print("this host's generated secret key was replaced by the new one")
    else:
        out.print(
            f"give every process the new key ({SECRET_KEY_ENV} or --secret-key-file) "
            "and restart them"
        )
