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
from collections.abc import Callable, Iterable
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
    seal,
    sealed_key_id,
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


_Binder = Callable[[tuple[object, ...]], str]
#: how many times a rotation looks again for secrets sealed under the old key while it ran
_ROTATION_PASSES = 3


def _opt_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _reseal(keys: SecretKeySource, new: SecretKey, sealed: str, binding: str) -> str:
    return seal(new, keys.open(sealed, binding=binding), binding=binding)


def _resealed(
    keys: SecretKeySource, new: SecretKey, rows: Iterable[tuple[object, ...]], bind: _Binder
) -> builtins.list[tuple[str, str]]:
    """``(sealed again, row key)`` for each ``(row key, sealed[, owner])`` row not yet
    sealed under ``new``."""
    return [
        (_reseal(keys, new, str(row[1]), bind(row)), str(row[0]))
        for row in rows
        if sealed_key_id(str(row[1])) != new.key_id
    ]


class SqliteKeys(SqliteBase):
    #: set on first use (see :attr:`secret_keys`)
    _secret_source: SecretKeySource | None = None
    #: the install's fingerprint secret, once opened, and the ids of the keys that opened it
    _install_secret: tuple[tuple[str, ...], bytes] | None = None

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

    async def _sealing_key(self) -> SecretKey:
        """The key a new secret is sealed with: the one the install's fingerprint secret is
        under decides between the current and a previous key (read afresh: a rotation by
        another process moves it; only while a previous key is given)."""
        if self.secret_keys.previous() is None:
            return self.secret_keys.current()
        stored = await self._stored_install_secret()
        return self.secret_keys.sealing_key(None if stored is None else sealed_key_id(stored))

    async def _fingerprint_secret(self) -> bytes:
        """The install's fingerprint secret, opened with the store's keys; made (or taken from
        an older version's file) when there is none yet. The first process to store one wins."""
        source = self.secret_keys
        key_ids = tuple(k.key_id for k in source.opening_keys())
        if self._install_secret is not None and self._install_secret[0] == key_ids:
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
                    (FINGERPRINT_ROW, seal(source.sealing_key(None), fresh, binding=binding)),
                )
            stored = await self._stored_install_secret()
            if stored is None:  # pragma: no cover - inserted just above
                raise StoreError("the fingerprint secret could not be stored")
        opened = source.open(stored, binding=binding)
        self._install_secret = (key_ids, opened)
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
        fingerprint = keyed_fingerprint(await self._fingerprint_secret(), secret)
        key = await self._sealing_key()
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
            await self._fingerprint_secret()  # the install's, so fingerprints stay
            key = await self._sealing_key()
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
            install = await self._fingerprint_secret()
            for key_id, owner, sealed, stored in rows:
                binding = api_key_binding(str(owner), str(key_id))
                plain = self.secret_keys.open(str(sealed), binding=binding)
                fingerprint = keyed_fingerprint(install, plain.decode("utf-8"))
                if fingerprint != stored:
                    changed.append((fingerprint, str(key_id)))
        except SecretKeyError:
            return 0
        if changed:
            async with self._write() as db:
                await db.executemany("UPDATE api_keys SET fingerprint = ? WHERE id = ?", changed)
        return len(changed)

    async def rotate_secret_key(self, new: SecretKey | None = None) -> int:
        """Seal under ``new`` (default: the current key) every stored secret sealed under
        another key, opening each with the current or the previous key; returns how many were
        sealed again. One transaction per pass; when a key added while a pass ran was sealed
        under the old key, the next pass takes it. When no given key opens every one,
        :class:`~tavernkit.errors.SecretKeyError` and that pass changed nothing."""
        source = self.secret_keys
        target = new if new is not None else source.current()
        total = 0
        for _ in range(_ROTATION_PASSES):
            count = await self._reseal_pass(source, target)
            total += count
            if count == 0:
                break
        if new is not None:
            source.use(new)
        self._install_secret = None
        return total

    async def _reseal_pass(self, source: SecretKeySource, target: SecretKey) -> int:
        async with self._write() as db:
            keys = await db.execute_fetchall(
                "SELECT id, secret, owner FROM api_keys WHERE secret <> ''"
            )
            stored = await db.execute_fetchall("SELECT name, sealed FROM store_secrets")
            try:
                keys_again = _resealed(
                    source, target, keys, lambda r: api_key_binding(str(r[2]), str(r[0]))
                )
                stored_again = _resealed(
                    source, target, stored, lambda r: store_secret_binding(str(r[0]))
                )
            except SecretKeyError:
                raise SecretKeyError(
                    "neither the current nor the previous secret key opens every stored API "
                    "key, so they cannot be sealed again: give the key they were sealed with "
                    "(nothing was changed)"
                ) from None
            # the fingerprint secret last: it says which key new secrets are sealed with
            await db.executemany("UPDATE api_keys SET secret = ? WHERE id = ?", keys_again)
            await db.executemany("UPDATE store_secrets SET sealed = ? WHERE name = ?", stored_again)
        return len(keys_again) + len(stored_again)

    async def _seal_keys_for(self, db: SqliteConnection, owner: str, to: str) -> None:
        rows = await db.execute_fetchall(
            "SELECT id, secret FROM api_keys WHERE owner = ? AND secret <> ''", (owner,)
        )
        if not rows:
            return
        fingerprint = await db.execute_fetchall(
            "SELECT sealed FROM store_secrets WHERE name = ?", (FINGERPRINT_ROW,)
        )
        under = sealed_key_id(str(fingerprint[0][0])) if fingerprint else None
        key = self.secret_keys.sealing_key(under)
        again = [
            (
                seal(
                    key,
                    self.secret_keys.open(str(s), binding=api_key_binding(owner, str(i))),
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
        return self.secret_keys.open(sealed, binding=api_key_binding(owner, key_id)).decode("utf-8")

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
