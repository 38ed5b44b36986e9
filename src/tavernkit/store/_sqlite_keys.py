"""The SQLite store's API keys and key-pool state (a part of
:class:`~tavernkit.store.sqlite.SqliteStore`).

The secrets live in private files beside the database (:mod:`tavernkit.store.key_files`); the
``api_keys`` rows keep an empty secret column, so a copied database file carries no key.
Their fingerprints are keyed with the install's own secret (see there); opening a store
recomputes any stored fingerprint that is not (:meth:`SqliteKeys.refresh_fingerprints`), so
the unsalted ones older versions wrote are replaced the first time this version opens the
database.
"""

from __future__ import annotations

import builtins
from datetime import datetime

from tavernkit.errors import NotFound, StoreError
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.store._sqlite_base import SqliteBase
from tavernkit.store.key_files import KeyFiles, key_dir_for, keyed_fingerprint
from tavernkit.store.protocol import ApiKeyInfo, KeyState

__all__ = ["SqliteKeys"]


def _opt_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


class SqliteKeys(SqliteBase):
    @property
    def key_files(self) -> KeyFiles:
        """Where this database's API key secrets are kept (``<db>.keys/``, one 0600 file each)."""
        return KeyFiles(key_dir_for(self.path))

    def _forget_key_secrets(self, key_ids: builtins.list[str]) -> None:
        files = self.key_files
        for key_id in key_ids:
            files.delete(key_id)

    async def add_api_key(
        self, provider: str, secret: str, *, owner: str = DEFAULT_OWNER, label: str = ""
    ) -> str:
        if not isinstance(secret, str) or not secret.strip():
            raise StoreError("an API key must be a non-empty string")
        if not provider:
            raise StoreError("an API key needs a provider")
        key_id = self._new_id()
        files = self.key_files
        fingerprint = files.fingerprint(secret)
        # the secret first: a row without its secret would be a key that cannot be used
        files.write(key_id, secret)
        try:
            async with self._write() as db:
                await db.execute(
                    "INSERT INTO api_keys (id, owner, provider, label, secret, fingerprint, "
                    "created) VALUES (?, ?, ?, ?, '', ?, ?)",
                    (key_id, owner, provider, label, fingerprint, self._now()),
                )
        except BaseException:
            files.delete(key_id)
            raise
        return key_id

    async def refresh_fingerprints(self) -> int:
        """Make every stored fingerprint the keyed one of this install (a row whose secret
        file is missing keeps its own); returns how many changed. The stores' openers call it,
        so it reads the key files once per start."""
        async with self._read() as db:
            rows = await db.execute_fetchall("SELECT id, fingerprint FROM api_keys")
        if not rows:
            return 0
        files = self.key_files
        install = files.fingerprint_secret()
        changed: builtins.list[tuple[str, str]] = []
        for key_id, stored in rows:
            try:
                secret = files.read(str(key_id))
            except StoreError:
                continue
            fingerprint = keyed_fingerprint(install, secret)
            if fingerprint != stored:
                changed.append((fingerprint, str(key_id)))
        if changed:
            async with self._write() as db:
                await db.executemany("UPDATE api_keys SET fingerprint = ? WHERE id = ?", changed)
        return len(changed)

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
        async with (
            self._read() as db,
            db.execute("SELECT 1 FROM api_keys WHERE id = ? AND owner = ?", (key_id, owner)) as cur,
        ):
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no API key {key_id!r}")
        return self.key_files.read(key_id)

    async def delete_api_key(self, key_id: str, *, owner: str = DEFAULT_OWNER) -> None:
        async with self._write() as db:
            cur = await db.execute(
                "DELETE FROM api_keys WHERE id = ? AND owner = ?", (key_id, owner)
            )
            if cur.rowcount == 0:
                raise NotFound(f"no API key {key_id!r}")
        self.key_files.delete(key_id)

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
