"""The secret key that seals API key secrets in the database, and the sealing itself.

Why in the database, encrypted: the processes of one deployment may run on several hosts over
one PostgreSQL database; a secret kept in a file on the host that saved it cannot be used by
the others. So the database holds each secret sealed with AES-256-GCM (AEAD, ``cryptography``'s
``AESGCM``) under a key-encryption key the operator gives every process once, and never the
plaintext: a dump, a replica or a backup of the database carries nothing usable without it.

Where the key comes from, first found wins:

- ``TAVERNKIT_SECRET_KEY``: the key as text (at least 32 characters; ``openssl rand -base64
  32`` makes one);
- ``TAVERNKIT_SECRET_KEY_FILE`` (``--secret-key-file`` sets it): a file holding that text;
- neither (a single host): ``secret.key`` in the data dir, made on first use (43 random
  characters, 0600), so nothing needs configuring; its text is what a second host is given as
  ``TAVERNKIT_SECRET_KEY``.

Setting both variables is refused (which one is meant?).

A previous key may be given beside it, for a rolling rotation across processes:
``TAVERNKIT_SECRET_KEY_PREVIOUS`` or ``TAVERNKIT_SECRET_KEY_PREVIOUS_FILE``
(``--previous-secret-key-file``). Opening a sealed secret then takes whichever of the two keys
sealed it. Sealing takes the key the database's secrets are under (:meth:`SecretKeySource.
sealing_key`): the previous key until ``tavernkit rotate-secret-key`` has sealed them again
under the current one, the current key afterwards. Why not always the current key: during a
rolling restart some processes still run with only the old key, and a secret sealed with the
new one would be unreadable to them; sealing with the old key until the rotation (which the
procedure runs once every process holds both keys) leaves nothing sealed under a key some
running process lacks, at every step. The AES key is HKDF-SHA-256 of the
text; the key's id is 12 hex digits of a hash of that AES key (it tells keys apart, reveals
nothing about them).

A sealed secret is the text ``tk1:<key id>:<base64url(nonce | ciphertext | tag)>``: it records
which key sealed it, so a process with another key says so at once instead of failing on a tag,
and its associated data binds it to what it belongs to (an API key's owner and row id, or the
name of a store secret) and to that key id, so a sealed secret copied into another row, or a row
given to another owner behind the store's back, does not open. (Handing a user's data over to
another user seals their keys again for the new owner, in the same transaction.)

Errors are :class:`~tavernkit.errors.SecretKeyError`, whose messages name no path, no key id and
no secret: they may reach a user through a turn.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import secrets
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from tavernkit.errors import SecretKeyError
from tavernkit.store.paths import data_dir

__all__ = [
    "GENERATED_KEY_FILE",
    "MIN_KEY_CHARS",
    "PREVIOUS_SECRET_KEY_ENV",
    "PREVIOUS_SECRET_KEY_FILE_ENV",
    "SEALED_PREFIX",
    "SECRET_KEY_ENV",
    "SECRET_KEY_FILE_ENV",
    "SecretKey",
    "SecretKeySource",
    "api_key_binding",
    "check_secret_key_settings",
    "open_sealed",
    "open_sealed_with",
    "read_secret_key_file",
    "replace_generated_key",
    "resolve_previous_secret_key",
    "resolve_secret_key",
    "seal",
    "sealed_key_id",
    "secret_key_from_text",
    "store_secret_binding",
]

SECRET_KEY_ENV = "TAVERNKIT_SECRET_KEY"
SECRET_KEY_FILE_ENV = "TAVERNKIT_SECRET_KEY_FILE"
PREVIOUS_SECRET_KEY_ENV = "TAVERNKIT_SECRET_KEY_PREVIOUS"
PREVIOUS_SECRET_KEY_FILE_ENV = "TAVERNKIT_SECRET_KEY_PREVIOUS_FILE"
#: the single host's own key, in the data dir
GENERATED_KEY_FILE = "secret.key"
#: a shorter text is refused: 32 characters of base64 are 192 bits
MIN_KEY_CHARS = 32
#: the format's mark and version
SEALED_PREFIX = "tk1"
_NONCE_BYTES = 12
_HKDF_INFO = b"tavernkit secret key v1"

Origin = Literal["env", "file", "generated"]

#: the secrets of the database were sealed with another key (the usual cause: a process not
#: given the deployment's key, which then made one of its own)
MISMATCH = (
    "the stored API keys were sealed with another secret key than this server's (and its "
    "previous one, if given): give every process of the deployment the same secret key "
    f"({SECRET_KEY_ENV} or --secret-key-file)"
)
ALTERED = (
    "a stored API key cannot be opened: its sealed secret was altered or copied from another "
    "key; add the key again"
)


@dataclass(frozen=True, slots=True)
class SecretKey:
    """A key-encryption key: the AES key and its id (``repr`` shows neither the key nor where
    it came from)."""

    aead_key: bytes = field(repr=False)
    key_id: str = field(repr=False)
    origin: Origin = "env"
    #: the file a generated key lives in (rotation replaces it)
    generated_file: Path | None = field(default=None, repr=False)


def secret_key_from_text(
    text: str, *, origin: Origin = "env", generated_file: Path | None = None
) -> SecretKey:
    """The key ``text`` (stripped) gives; :class:`SecretKeyError` when it is too short."""
    material = text.strip()
    if len(material) < MIN_KEY_CHARS:
        raise SecretKeyError(
            f"a secret key must be at least {MIN_KEY_CHARS} characters "
            "(make one with: openssl rand -base64 32)"
        )

    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO).derive(
        material.encode("utf-8")
    )
    key_id = hashlib.sha256(b"tavernkit key id\0" + derived).hexdigest()[:12]
    return SecretKey(derived, key_id, origin, generated_file)


def read_secret_key_file(
    path: Path,
    *,
    origin: Origin = "file",
    setting: str = f"{SECRET_KEY_FILE_ENV} or --secret-key-file",
) -> SecretKey:
    """The key in the file at ``path``. Its error names the ``setting``, not the path (it may
    reach a user when the key is first needed by a turn)."""
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        cause = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise SecretKeyError(f"the secret key file ({setting}) cannot be read: {cause}") from None
    generated = path if origin == "generated" else None
    return secret_key_from_text(text, origin=origin, generated_file=generated)


def _write_private(path: Path, data: bytes, *, replace: bool) -> None:
    """Write ``data`` to ``path`` readable by the user alone, atomically (a temporary file
    renamed, or linked when ``replace`` is false: the first process to make the file wins)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if replace:
            os.replace(temp, path)
        else:
            with contextlib.suppress(FileExistsError):
                os.link(temp, path)
    finally:
        with contextlib.suppress(OSError):
            temp.unlink()


def _generated_key(path: Path) -> SecretKey:
    """The single host's key at ``path``, made (43 random characters, 0600) when missing."""
    if not path.exists():
        try:
            _write_private(path, secrets.token_urlsafe(32).encode("ascii"), replace=False)
        except OSError as exc:
            raise SecretKeyError(
                f"cannot make this host's secret key in the data dir: {exc.strerror or exc}"
            ) from None
    return read_secret_key_file(path, origin="generated")


def replace_generated_key(key: SecretKey, text: str) -> None:
    """Make ``text`` the single host's key (after a rotation away from the generated one)."""
    if key.generated_file is None:
        raise SecretKeyError("this secret key was given, not generated: nothing to replace")
    secret_key_from_text(text)  # refused before anything is written when unusable
    try:
        _write_private(key.generated_file, text.strip().encode("utf-8"), replace=True)
    except OSError as exc:
        raise SecretKeyError(
            f"cannot write this host's secret key in the data dir: {exc.strerror or exc}"
        ) from None


def resolve_secret_key(environ: Mapping[str, str] | None = None) -> SecretKey:
    """This process's key (see the module docstring for the order)."""
    env = os.environ if environ is None else environ
    text = env.get(SECRET_KEY_ENV, "")
    file = env.get(SECRET_KEY_FILE_ENV, "")
    if text and file:
        raise SecretKeyError(f"both {SECRET_KEY_ENV} and {SECRET_KEY_FILE_ENV} are set: give one")
    if text:
        return secret_key_from_text(text)
    if file:
        return read_secret_key_file(Path(file).expanduser())
    return _generated_key(data_dir(environ=env) / GENERATED_KEY_FILE)


def resolve_previous_secret_key(environ: Mapping[str, str] | None = None) -> SecretKey | None:
    """The previous key given beside this process's key (a rolling rotation), or ``None``."""
    env = os.environ if environ is None else environ
    text = env.get(PREVIOUS_SECRET_KEY_ENV, "")
    file = env.get(PREVIOUS_SECRET_KEY_FILE_ENV, "")
    if text and file:
        raise SecretKeyError(
            f"both {PREVIOUS_SECRET_KEY_ENV} and {PREVIOUS_SECRET_KEY_FILE_ENV} are set: give one"
        )
    if text:
        return secret_key_from_text(text)
    if file:
        setting = f"{PREVIOUS_SECRET_KEY_FILE_ENV} or --previous-secret-key-file"
        return read_secret_key_file(Path(file).expanduser(), setting=setting)
    return None


def check_secret_key_settings(environ: Mapping[str, str] | None = None) -> None:
    """Refuse a given key that cannot be used (for a server's start: it then fails before it
    listens, not at the first turn); a single host's generated key is left to first use. A
    previous key needs a given current one (a generated key is never rotated that way)."""
    env = os.environ if environ is None else environ
    given = bool(env.get(SECRET_KEY_ENV) or env.get(SECRET_KEY_FILE_ENV))
    if given:
        resolve_secret_key(env)
    if resolve_previous_secret_key(env) is not None and not given:
        raise SecretKeyError(
            f"a previous secret key is given without a current one: give the new key as "
            f"{SECRET_KEY_ENV} or --secret-key-file beside it"
        )


class SecretKeySource:
    """A store's keys, the current one and maybe a previous one: resolved from the environment
    at first use, then kept; or fixed."""

    def __init__(self, key: SecretKey | None = None, previous: SecretKey | None = None) -> None:
        self._key = key
        self._previous = previous
        #: a fixed key comes with its previous one (or none); otherwise read with the current
        self._previous_known = key is not None

    def current(self) -> SecretKey:
        if self._key is None:
            self._key = resolve_secret_key()
        return self._key

    def previous(self) -> SecretKey | None:
        if not self._previous_known:
            self._previous = resolve_previous_secret_key()
            self._previous_known = True
        return self._previous

    def opening_keys(self) -> tuple[SecretKey, ...]:
        """The keys that open secrets: the current one, then the previous one."""
        previous = self.previous()
        current = self.current()
        return (current,) if previous is None else (current, previous)

    def sealing_key(self, database_key_id: str | None) -> SecretKey:
        """The key new secrets are sealed with, given the id of the key the database's secrets
        are under (``None``: none stored yet): the previous key while one is given and the
        database is not yet under the current one (see the module docstring)."""
        previous = self.previous()
        current = self.current()
        if previous is None or database_key_id == current.key_id:
            return current
        return previous

    def open(self, sealed: str, *, binding: str) -> bytes:
        return open_sealed_with(self.opening_keys(), sealed, binding=binding)

    def use(self, key: SecretKey) -> None:
        """Seal and open with ``key`` alone from now on (after a rotation)."""
        self._key = key
        self._previous = None
        self._previous_known = True


def api_key_binding(owner: str, key_id: str) -> str:
    """What an API key's sealed secret is bound to: its owner and its row."""
    return f"api_key\0{owner}\0{key_id}"


def store_secret_binding(name: str) -> str:
    """What a store secret (``store_secrets`` row ``name``) is bound to."""
    return f"store\0{name}"


def _aad(binding: str, key_id: str) -> bytes:
    return f"tavernkit sealed v1\0{binding}\0{key_id}".encode()


def seal(key: SecretKey, plaintext: bytes, *, binding: str) -> str:
    """``plaintext`` sealed under ``key`` for ``binding`` (see the module docstring)."""

    nonce = secrets.token_bytes(_NONCE_BYTES)
    sealed = AESGCM(key.aead_key).encrypt(nonce, plaintext, _aad(binding, key.key_id))
    body = base64.urlsafe_b64encode(nonce + sealed).decode("ascii").rstrip("=")
    return f"{SEALED_PREFIX}:{key.key_id}:{body}"


def sealed_key_id(sealed: str) -> str | None:
    """The id of the key that sealed ``sealed`` (``None``: not a sealed secret)."""
    parts = sealed.split(":")
    if len(parts) != 3 or parts[0] != SEALED_PREFIX:
        return None
    return parts[1]


def open_sealed_with(keys: Sequence[SecretKey], sealed: str, *, binding: str) -> bytes:
    """The plaintext of ``sealed``, opened with whichever of ``keys`` sealed it (its recorded
    key id says which); the errors of :func:`open_sealed`."""
    sealed_by = sealed_key_id(sealed)
    for key in keys:
        if key.key_id == sealed_by:
            return open_sealed(key, sealed, binding=binding)
    return open_sealed(keys[0], sealed, binding=binding)  # its error: altered, or mismatch


def open_sealed(key: SecretKey, sealed: str, *, binding: str) -> bytes:
    """The plaintext of ``sealed``; :class:`SecretKeyError` when ``key`` did not seal it or it
    was altered or bound to something else."""

    sealed_by = sealed_key_id(sealed)
    if sealed_by is None:
        raise SecretKeyError(ALTERED)
    if sealed_by != key.key_id:
        raise SecretKeyError(MISMATCH)
    body = sealed.split(":")[2]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        return AESGCM(key.aead_key).decrypt(
            raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], _aad(binding, key.key_id)
        )
    except (InvalidTag, ValueError):
        raise SecretKeyError(ALTERED) from None
