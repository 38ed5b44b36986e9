"""API keys at rest: one private file per key, in a folder beside the database, never in it.

Why files and not encryption inside the database: the database is what people copy, back up,
attach to bug reports and sync between machines; a secret encrypted in it is only as safe as
the place its encryption key lives, which would have to be outside the database anyway (a file
beside it) — so the secret itself may as well live there, with no cipher to get wrong and no
new dependency (``cryptography`` is not installed by default). The database keeps the key's
row (id, owner, provider, label, fingerprint, cooldown state) with an empty ``secret`` column,
so listing, rotation and cooldowns never touch a secret, and a copied database file carries
none.

Layout: ``tavernkit.db`` → ``tavernkit.db.keys/`` (0700), one file per key id (0600), the
secret as UTF-8. Writes go to a temporary file created 0600 in the same folder, are flushed to
disk and renamed into place, so a crash leaves the old secret or the new one, never half of
one. Key ids are the store's own (hex); anything else is refused, so no id can name a path
outside the folder.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from pathlib import Path

from tavernkit.errors import StoreError

__all__ = ["KeyFiles", "key_dir_for"]

_KEY_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


def key_dir_for(db_path: Path | str) -> Path:
    """The key folder of the database at ``db_path``: ``<name>.keys`` beside it."""
    path = Path(db_path)
    return path.with_name(path.name + ".keys")


class KeyFiles:
    """The secrets of one database's API keys (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, key_id: str) -> Path:
        if not _KEY_ID.fullmatch(key_id):
            raise StoreError(f"not a key id: {key_id!r}")
        return self.folder / key_id

    def _ensure_folder(self) -> None:
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            # mkdir's mode is masked by the umask; the folder holds secrets, so set it outright
            self.folder.chmod(0o700)
        except OSError as exc:
            raise StoreError(f"cannot create the key folder {self.folder}: {exc}") from exc

    def write(self, key_id: str, secret: str) -> None:
        """Store ``secret`` for ``key_id`` (atomically; readable by the user alone)."""
        target = self._path(key_id)
        self._ensure_folder()
        temp = self.folder / f".{key_id}.{uuid.uuid4().hex}.tmp"
        try:
            fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(secret.encode("utf-8"))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, target)
        except OSError as exc:
            with contextlib.suppress(OSError):
                temp.unlink()
            raise StoreError(f"cannot write the secret of API key {key_id!r}: {exc}") from exc

    def read(self, key_id: str) -> str:
        path = self._path(key_id)
        try:
            return path.read_bytes().decode("utf-8")
        except FileNotFoundError:
            raise StoreError(
                f"the secret of API key {key_id!r} is missing from {self.folder} "
                "(a database copied without its key folder?): add the key again"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"cannot read the secret of API key {key_id!r}: {exc}") from exc

    def delete(self, key_id: str) -> None:
        """Remove ``key_id``'s secret (nothing to do when it is gone already)."""
        try:
            self._path(key_id).unlink()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreError(f"cannot delete the secret of API key {key_id!r}: {exc}") from exc
