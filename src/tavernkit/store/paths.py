"""Where tavernkit keeps its data: ``$TAVERNKIT_HOME``, else the platform's user data dir.

The folder holds API keys, so it is created private to the user (0o700) and the database file
0o600; a folder that already exists is left as the user set it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from platformdirs import user_data_dir

from tavernkit.errors import StoreError

__all__ = ["DB_FILE_NAME", "data_dir", "default_db_path", "ensure_private_file"]

DB_FILE_NAME = "tavernkit.db"
_ENV = "TAVERNKIT_HOME"


def data_dir(*, create: bool = True, environ: Mapping[str, str] | None = None) -> Path:
    """The data folder, created (0o700) when missing and ``create`` is true."""
    env = os.environ if environ is None else environ
    raw = env.get(_ENV)
    path = Path(raw).expanduser() if raw else Path(user_data_dir("tavernkit", appauthor=False))
    if create and not path.is_dir():
        try:
            path.mkdir(parents=True, mode=0o700, exist_ok=True)
            # mkdir's mode is masked by the umask; the folder holds secrets, so set it outright.
            path.chmod(0o700)
        except OSError as exc:
            raise StoreError(f"cannot create data dir {path}: {exc.strerror or exc}") from exc
    return path


def default_db_path(*, environ: Mapping[str, str] | None = None) -> Path:
    return data_dir(environ=environ) / DB_FILE_NAME


def ensure_private_file(path: Path) -> None:
    """Create ``path`` readable by the user alone, before SQLite opens it (SQLite gives its
    -wal and -shm files the database file's permissions)."""
    if path.exists():
        return
    try:
        path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)
        path.chmod(0o600)
    except OSError as exc:
        raise StoreError(f"cannot create database {path}: {exc.strerror or exc}") from exc
