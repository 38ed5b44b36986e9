"""The SQLite store's API keys and key-pool state (a part of
:class:`~tavernkit.store.sqlite.SqliteStore`, and so of the PostgreSQL store too).

A key's secret is in its ``api_keys`` row, sealed with the process's secret key
(:mod:`tavernkit.store.secret_key`: AES-GCM, bound to its owner and row; a hand-over to
another user seals it again for them), so every process of a
deployment, on any host, can use a key any of them saved, and the database never holds a
plaintext. Listing, cooldowns and rotation of the pool never open a secret.

Fingerprints are keyed with the install's own random secret (the ``fingerprint`` row of
``store_secrets``, sealed the same way, made when the first key is added): a copy of the
database cannot be checked against a list of leaked keys, and every process gives a key the
same fingerprint. Opening a store recomputes any stored fingerprint that is not keyed with it
(:meth:`SqliteKeys.refresh_fingerprints`: the unsalted ones of older versions).

Older versions kept the secrets in private files beside the database (or in
``TAVERNKIT_KEY_DIR`` for PostgreSQL; :mod:`tavernkit.store.key_files`). Opening a store moves
any such file into its row, sealed, keeps the install's fingerprint secret, and then removes
the files (:meth:`SqliteKeys.adopt_key_files`; a second open finds nothing left to do).
"""

from __future__ import annotations

import builtins
import contextlib
import secrets
from datetime import datetime
from typing import TYPE_CHECKING

from tavernkit.errors import NotFound, SecretKeyError, StoreError
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.store._sqlite_base import SqliteBase
from tavernkit.store.key_files import FINGERPRINT_SECRET, KeyFiles, key_dir_for, keyed_fingerprint
from tavernkit.store.key_types import ApiKeyInfo, KeyState
from tavernkit.store.secret_key import (
    SecretKey,
    SecretKeySource,
    api_key_binding,
    open_sealed,
    seal,
    store_secret_binding,
)

if TYPE_CHECKING:
    from tavernkit.store.sqlite_thread import SqliteConnection

__all__ = ["FINGERPRINT_ROW", "SqliteKeys"]

#: the ``store_secrets`` row of the install's fingerprint secret
FINGERPRINT_ROW = "fingerprint"
_FINGERPRINT_BYTES = 32
#: a row whose secret never reached the database (its key file was lost)
_MISSING = (
    "the secret of this API key is not in the database (it was kept in a file that is gone: "
    "a database copied without its key folder?): add the key again"
)


def _opt_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _reseal(old: SecretKey, new: SecretKey, sealed: str, binding: str) -> str:
    return seal(new, open_sealed(old, sealed, binding=binding), binding=binding)


class SqliteKeys(SqliteBase):
    #: set on first use (see :attr:`secret_keys`)
    _secret_source: SecretKeySource | None = None
    #: the install's fingerprint secret, once opened, and the id of the key that opened it
    _install_secret: tuple[str, bytes] | None = None

    @property
    def secret_keys(self) -> SecretKeySource:
        """The key this store seals and opens secrets with (from the environment, on first
        use; see :mod:`tavernkit.store.secret_key`)."""
        if self._secret_source is None:
            self._secret_source = SecretKeySource()
        return self._secret_source

    def use_secret_keys(self, source: SecretKeySource) -> None:
        """Seal and open with ``source``'s key (a store opened to copy into another)."""
        self._secret_source = source
        self._install_secret = None

    @property
    def key_files(self) -> KeyFiles:
        """Where older versions kept this database's key secrets (``<db>.keys/``), read once
        by :meth:`adopt_key_files`."""
        return KeyFiles(key_dir_for(self.path))

    async def _stored_install_secret(self) -> str | None:
        async with self._read() as db:
            rows = list(
                await db.execute_fetchall(
                    "SELECT sealed FROM store_secrets WHERE name = ?", (FINGERPRINT_ROW,)
                )
            )
        return str(rows[0][0]) if rows else None

    async def _fingerprint_secret(self, key: SecretKey) -> bytes:
        """The install's fingerprint secret, opened with ``key``; made (or taken from an older
        version's file) when there is none yet. The first process to store one wins."""
        if self._install_secret is not None and self._install_secret[0] == key.key_id:
            return self._install_secret[1]
        binding = store_secret_binding(FINGERPRINT_ROW)
        stored = await self._stored_install_secret()
        if stored is None:
            legacy = self._legacy_fingerprint_secret()
            fresh = legacy or secrets.token_bytes(_FINGERPRINT_BYTES)
            async with self._write() as db:
                await db.execute(
                    "INSERT INTO store_secrets (name, sealed) VALUES (?, ?) "
                    "ON CONFLICT (name) DO NOTHING",
                    (FINGERPRINT_ROW, seal(key, fresh, binding=binding)),
                )
            stored = await self._stored_install_secret()
            if stored is None:  # pragma: no cover - inserted just above
                raise StoreError("the fingerprint secret could not be stored")
        opened = open_sealed(key, stored, binding=binding)
        self._install_secret = (key.key_id, opened)
        return opened

    def _legacy_fingerprint_secret(self) -> bytes | None:
        path = self.key_files.folder / FINGERPRINT_SECRET
        try:
            found = path.read_bytes()
        except OSError:
            return None
        return found if len(found) >= _FINGERPRINT_BYTES else None

    async def add_api_key(
        self, provider: str, secret: str, *, owner: str = DEFAULT_OWNER, label: str = ""
    ) -> str:
        if not isinstance(secret, str) or not secret.strip():
            raise StoreError("an API key must be a non-empty string")
        if not provider:
            raise StoreError("an API key needs a provider")
        key = self.secret_keys.current()
        fingerprint = keyed_fingerprint(await self._fingerprint_secret(key), secret)
        key_id = self._new_id()
        sealed = seal(key, secret.encode("utf-8"), binding=api_key_binding(owner, key_id))
        async with self._write() as db:
            await db.execute(
                "INSERT INTO api_keys (id, owner, provider, label, secret, fingerprint, "
                "created) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key_id, owner, provider, label, sealed, fingerprint, self._now()),
            )
        return key_id

    async def adopt_key_files(self) -> int:
        """Move the secrets an older version kept in files into their rows, sealed, then
        remove the files (see the module docstring); returns how many moved. Nothing to do
        (no folder) costs one ``stat``."""
        files = self.key_files
        if not files.folder.is_dir():
            return 0
        async with self._read() as db:
            rows = await db.execute_fetchall("SELECT id, owner, secret FROM api_keys")
        waiting = [
            (str(r[0]), str(r[1]))
            for r in rows
            if not r[2] and (files.folder / str(r[0])).is_file()
        ]
        moved: builtins.list[tuple[str, str]] = []
        if waiting or (files.folder / FINGERPRINT_SECRET).is_file():
            key = self.secret_keys.current()
            await self._fingerprint_secret(key)  # the install's, so fingerprints stay
            for key_id, owner in waiting:
                plain = files.read(key_id).encode("utf-8")
                moved.append((seal(key, plain, binding=api_key_binding(owner, key_id)), key_id))
        if moved:
            async with self._write() as db:
                await db.executemany(
                    "UPDATE api_keys SET secret = ? WHERE id = ? AND secret = ''", moved
                )
        # only what the database now holds goes: a file of a key it lacks is left alone
        for key_id in [str(r[0]) for r in rows if r[2]] + [key_id for key_id, _ in waiting]:
            files.delete(key_id)
        if await self._stored_install_secret() is not None:
            with contextlib.suppress(OSError):
                (files.folder / FINGERPRINT_SECRET).unlink()
        with contextlib.suppress(OSError):
            files.folder.rmdir()  # only when empty
        return len(moved)

    async def refresh_fingerprints(self) -> int:
        """Make every stored fingerprint the keyed one of this install; returns how many
        changed. A process whose secret key does not open the secrets changes nothing (its
        turns say why). The stores' openers call it."""
        async with self._read() as db:
            rows = await db.execute_fetchall(
                "SELECT id, owner, secret, fingerprint FROM api_keys WHERE secret <> ''"
            )
        if not rows:
            return 0
        changed: builtins.list[tuple[str, str]] = []
        try:
            key = self.secret_keys.current()
            install = await self._fingerprint_secret(key)
            for key_id, owner, sealed, stored in rows:
                binding = api_key_binding(str(owner), str(key_id))
                plain = open_sealed(key, str(sealed), binding=binding)
                fingerprint = keyed_fingerprint(install, plain.decode("utf-8"))
                if fingerprint != stored:
                    changed.append((fingerprint, str(key_id)))
        except SecretKeyError:
            return 0
        if changed:
            async with self._write() as db:
                await db.executemany("UPDATE api_keys SET fingerprint = ? WHERE id = ?", changed)
        return len(changed)

    async def rotate_secret_key(self, new: SecretKey) -> int:
        """Seal every stored secret under ``new`` instead of the current key, in one
        transaction; returns how many were sealed again. When the current key does not open
        every one, :class:`~tavernkit.errors.SecretKeyError` and nothing changed."""
        old = self.secret_keys.current()
        async with self._write() as db:
            keys = await db.execute_fetchall(
                "SELECT id, owner, secret FROM api_keys WHERE secret <> ''"
            )
            stored = await db.execute_fetchall("SELECT name, sealed FROM store_secrets")
            try:
                keys_again = [
                    (_reseal(old, new, str(s), api_key_binding(str(o), str(i))), str(i))
                    for i, o, s in keys
                ]
                stored_again = [
                    (_reseal(old, new, str(s), store_secret_binding(str(n))), str(n))
                    for n, s in stored
                ]
            except SecretKeyError:
                raise SecretKeyError(
                    "the current secret key does not open the stored API keys, so they cannot "
                    "be sealed again: give the key they were sealed with (nothing was changed)"
                ) from None
            await db.executemany("UPDATE api_keys SET secret = ? WHERE id = ?", keys_again)
            await db.executemany("UPDATE store_secrets SET sealed = ? WHERE name = ?", stored_again)
        self.secret_keys.use(new)
        self._install_secret = None
        return len(keys_again) + len(stored_again)

    async def _seal_keys_for(self, db: SqliteConnection, owner: str, to: str) -> None:
        rows = await db.execute_fetchall(
            "SELECT id, secret FROM api_keys WHERE owner = ? AND secret <> ''", (owner,)
        )
        if not rows:
            return
        key = self.secret_keys.current()
        again = [
            (
                seal(
                    key,
                    open_sealed(key, str(s), binding=api_key_binding(owner, str(i))),
                    binding=api_key_binding(to, str(i)),
                ),
                str(i),
            )
            for i, s in rows
        ]
        await db.executemany("UPDATE api_keys SET secret = ? WHERE id = ?", again)

    async def list_api_keys(
        self, provider: str | None = None, *, owner: str = DEFAULT_OWNER
    ) -> builtins.list[ApiKeyInfo]:
        sql = "SELECT id, provider, label, fingerprint, created FROM api_keys WHERE owner = ?"
        params: tuple[str, ...] = (owner,)
        if provider is not None:
            sql += " AND provider = ?"
            params = (owner, provider)
        async with self._read() as db, db.execute(sql + " ORDER BY created, id", params) as cur:
            return [
                ApiKeyInfo(
                    id=r[0],
                    provider=r[1],
                    label=r[2],
                    fingerprint=r[3],
                    created=datetime.fromisoformat(r[4]),
                )
                for r in await cur.fetchall()
            ]

    async def get_api_key_secret(self, key_id: str, *, owner: str = DEFAULT_OWNER) -> str:
        async with self._read() as db:
            rows = list(
                await db.execute_fetchall(
                    "SELECT secret FROM api_keys WHERE id = ? AND owner = ?", (key_id, owner)
                )
            )
        if not rows:
            raise NotFound(f"no API key {key_id!r}")
        sealed = str(rows[0][0])
        if not sealed:
            raise StoreError(_MISSING)
        key = self.secret_keys.current()
        return open_sealed(key, sealed, binding=api_key_binding(owner, key_id)).decode("utf-8")

    async def delete_api_key(self, key_id: str, *, owner: str = DEFAULT_OWNER) -> None:
        async with self._write() as db:
            cur = await db.execute(
                "DELETE FROM api_keys WHERE id = ? AND owner = ?", (key_id, owner)
            )
            if cur.rowcount == 0:
                raise NotFound(f"no API key {key_id!r}")

    async def get_key_state(
        self, key_id: str, *, owner: str = DEFAULT_OWNER, model: str = ""
    ) -> KeyState:
        if model:
            # a model's rest (010_key_rests): no use count of its own
            sql = (
                "SELECT k.id, s.cooldown_until, s.failures, s.last_error_code, s.last_used, 0 "
                "FROM api_keys k LEFT JOIN key_rests s ON s.key_id = k.id AND s.model = ? "
                "WHERE k.id = ? AND k.owner = ?"
            )
            args: tuple[str, ...] = (model, key_id, owner)
        else:
            sql = (
                "SELECT k.id, s.cooldown_until, s.failures, s.last_error_code, s.last_used, s.uses "
                "FROM api_keys k LEFT JOIN key_state s ON s.key_id = k.id "
                "WHERE k.id = ? AND k.owner = ?"
            )
            args = (key_id, owner)
        async with self._read() as db, db.execute(sql, args) as cur:
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no API key {key_id!r}")
        return KeyState(
            key_id=row[0],
            model=model,
            cooldown_until=_opt_time(row[1]),
            failures=int(row[2] or 0),
            last_error_code=row[3],
            last_used=_opt_time(row[4]),
            uses=int(row[5] or 0),
        )

    async def put_key_state(self, state: KeyState, *, owner: str = DEFAULT_OWNER) -> None:
        common = (
            state.cooldown_until.isoformat() if state.cooldown_until else None,
            state.failures,
            state.last_error_code,
            state.last_used.isoformat() if state.last_used else None,
        )
        async with self._write() as db:
            async with db.execute(
                "SELECT 1 FROM api_keys WHERE id = ? AND owner = ?", (state.key_id, owner)
            ) as cur:
                if await cur.fetchone() is None:
                    raise NotFound(f"no API key {state.key_id!r}")
            if state.model:
                await db.execute(
                    "INSERT INTO key_rests (key_id, model, cooldown_until, failures, "
                    "last_error_code, last_used, updated) VALUES (?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (key_id, model) DO UPDATE SET "
                    "cooldown_until = excluded.cooldown_until, failures = excluded.failures, "
                    "last_error_code = excluded.last_error_code, "
                    "last_used = excluded.last_used, updated = excluded.updated",
                    (state.key_id, state.model, *common, self._now()),
                )
                return
            await db.execute(
                "INSERT INTO key_state (key_id, cooldown_until, failures, last_error_code, "
                "last_used, uses, updated) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (key_id) DO UPDATE SET "
                "cooldown_until = excluded.cooldown_until, failures = excluded.failures, "
                "last_error_code = excluded.last_error_code, last_used = excluded.last_used, "
                "uses = excluded.uses, updated = excluded.updated",
                (state.key_id, *common, state.uses, self._now()),
            )
