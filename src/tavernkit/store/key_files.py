"""Where versions before migration 015 kept API key secrets: one private file per key, in a
folder beside the database (``TAVERNKIT_KEY_DIR`` or ``<data dir>/postgres-keys/...`` for
PostgreSQL). The secrets are now sealed in the database (:mod:`tavernkit.store.secret_key`);
this module is what reads the old files once, when a store opened by this version moves them
in (``SqliteKeys.adopt_key_files``), and what migration 003 still writes for a database older
than that.

Layout: ``tavernkit.db`` → ``tavernkit.db.keys/`` (0700), one file per key id (0600), the
secret as UTF-8, and the install's fingerprint secret (``.fingerprint-secret``, 32 bytes), which
moves into the database with the keys so their fingerprints stay. Writes go to a temporary file
created 0600 in the same folder, flushed and renamed into place. Key ids are the store's own
(hex); anything else is refused, so no id can name a path outside the folder.

Fingerprints: :func:`keyed_fingerprint`, 12 hex digits of HMAC-SHA-256 over the key keyed with
the install's own secret: it tells two keys apart, stays the same for the same key, and a copy
of the database cannot be checked against a list of leaked keys without the secret.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import uuid
from pathlib import Path

from tavernkit.errors import StoreError

__all__ = ["FINGERPRINT_SECRET", "KeyFiles", "key_dir_for", "keyed_fingerprint"]

_KEY_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
#: the fingerprint secret's file in the key folder (a dot: no key id can name it)
FINGERPRINT_SECRET = ".fingerprint-secret"
_SECRET_BYTES = 32


def keyed_fingerprint(install_secret: bytes, secret: str) -> str:
    """The fingerprint of API key ``secret`` under ``install_secret``: 12 hex digits of
    HMAC-SHA-256."""
    return hmac.new(install_secret, secret.encode("utf-8"), hashlib.sha256).hexdigest()[:12]


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

    def fingerprint_secret(self) -> bytes:
        """This install's fingerprint secret, made (atomically; the first process to make it
        wins, every other one reads that one) when there is none yet."""
        path = self.folder / FINGERPRINT_SECRET
        try:
            found = path.read_bytes()
        except FileNotFoundError:
            found = self._make_fingerprint_secret(path)
        except OSError as exc:
            raise StoreError(f"cannot read the fingerprint secret in {self.folder}: {exc}") from exc
        if len(found) < _SECRET_BYTES:
            raise StoreError(f"the fingerprint secret {path} is damaged (too short)")
        return found

    def _make_fingerprint_secret(self, path: Path) -> bytes:
        self._ensure_folder()
        temp = self.folder / f"{FINGERPRINT_SECRET}.{uuid.uuid4().hex}.tmp"
        try:
            fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(secrets.token_bytes(_SECRET_BYTES))
                handle.flush()
                os.fsync(handle.fileno())
            # a link never replaces: a secret another process made first stays the one
            with contextlib.suppress(FileExistsError):
                os.link(temp, path)
            return path.read_bytes()
        except OSError as exc:
            raise StoreError(f"cannot make the fingerprint secret in {self.folder}: {exc}") from exc
        finally:
            with contextlib.suppress(OSError):
                temp.unlink()

    def adopt_fingerprint_secret(self, install_secret: bytes) -> None:
        """Make ``install_secret`` this folder's fingerprint secret (a store copied to another
        backend keeps its install's fingerprints; only for a folder whose store is empty)."""
        self._ensure_folder()
        target = self.folder / FINGERPRINT_SECRET
        temp = self.folder / f"{FINGERPRINT_SECRET}.{uuid.uuid4().hex}.tmp"
        try:
            fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(install_secret)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, target)
        except OSError as exc:
            with contextlib.suppress(OSError):
                temp.unlink()
            message = f"cannot write the fingerprint secret in {self.folder}: {exc}"
            raise StoreError(message) from exc

    def fingerprint(self, secret: str) -> str:
        """``secret``'s fingerprint in this install (see the module docstring)."""
        return keyed_fingerprint(self.fingerprint_secret(), secret)

    def delete(self, key_id: str) -> None:
        """Remove ``key_id``'s secret (nothing to do when it is gone already)."""
        try:
            self._path(key_id).unlink()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreError(f"cannot delete the secret of API key {key_id!r}: {exc}") from exc
