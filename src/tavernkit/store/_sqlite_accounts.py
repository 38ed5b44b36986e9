"""The server's accounts (users, API tokens, sessions) in SQLite: the
:class:`~tavernkit.store.accounts.AccountStore` half of
:class:`~tavernkit.store.sqlite.SqliteStore`."""

from __future__ import annotations

import builtins
from datetime import datetime, timedelta

from tavernkit.errors import Conflict, NotFound, StoreError
from tavernkit.store._sqlite_base import SqliteBase
from tavernkit.store.accounts import SessionRecord, TokenRecord, UserRecord
from tavernkit.store.sqlite_thread import SqliteConnection

__all__ = ["SqliteAccounts"]

_USER_COLUMNS = "id, name, owner, is_admin, created, shared_fallback"
#: a session's expiry (a token's last use) is written again only when it moves by more than this
_EXTEND_STEP = timedelta(minutes=1)


def _user(row: tuple[object, ...]) -> UserRecord:
    return UserRecord(
        id=str(row[0]),
        name=str(row[1]),
        owner=str(row[2]),
        is_admin=bool(row[3]),
        created=datetime.fromisoformat(str(row[4])),
        shared_fallback=bool(row[5]),
    )


def _token(row: tuple[object, ...]) -> TokenRecord:
    return TokenRecord(
        id=str(row[0]),
        user_id=str(row[1]),
        label=str(row[2]),
        created=datetime.fromisoformat(str(row[3])),
        last_used=datetime.fromisoformat(str(row[4])) if row[4] else None,
    )


def _name_key(name: str) -> str:
    return name.strip().casefold()


#: the tables whose rows belong to an owner by an ``owner`` column; the rows that hang off
#: them (blobs, links, key states, messages, swipes) go with them by ``ON DELETE CASCADE``
_OWNED_TABLES = ("chats", "records", "api_keys", "memory_vectors", "global_variables", "settings")
#: how many clashing names a refused hand-over lists
_CLASHES_SHOWN = 10


async def _owner_of(db: SqliteConnection, user_id: str) -> str:
    rows = list(await db.execute_fetchall("SELECT owner FROM users WHERE id = ?", (user_id,)))
    if not rows:
        raise NotFound(f"no user {user_id!r}")
    return str(rows[0][0])


async def _delete_owned(db: SqliteConnection, owner: str) -> list[str]:
    """Delete every row ``owner`` has (chats first: their messages, swipes and vectors go
    with them, the API keys with their sealed secrets); the ids of the API keys deleted."""
    keys = await db.execute_fetchall("SELECT id FROM api_keys WHERE owner = ?", (owner,))
    for table in _OWNED_TABLES:
        await db.execute(f"DELETE FROM {table} WHERE owner = ?", (owner,))
    return [str(row[0]) for row in keys]


async def _hand_over(db: SqliteConnection, owner: str, to: str) -> None:
    """Give ``to`` every record, chat, API key and vector of ``owner``, refused whole
    (:class:`Conflict`) when a record's name is one ``to`` already uses for that kind. ``to``
    keeps its own settings and its variables of the same names; ``owner``'s go."""
    clashes = list(
        await db.execute_fetchall(
            "SELECT a.kind, a.name FROM records a JOIN records b ON b.owner = ? "
            "AND b.kind = a.kind AND b.name_key = a.name_key WHERE a.owner = ? "
            "ORDER BY a.kind, a.name",
            (to, owner),
        )
    )
    if clashes:
        named = ", ".join(f"{kind} {name!r}" for kind, name in clashes[:_CLASHES_SHOWN])
        more = len(clashes) - _CLASHES_SHOWN
        raise Conflict(
            f"the receiving user already has records of these names: {named}"
            + (f" and {more} more" if more > 0 else "")
            + "; rename or delete them first, or hand over to another user"
        )
    for table in ("chats", "records", "api_keys", "memory_vectors"):
        await db.execute(f"UPDATE {table} SET owner = ? WHERE owner = ?", (to, owner))
    await db.execute(
        "UPDATE global_variables SET owner = ? WHERE owner = ? AND name NOT IN "
        "(SELECT name FROM global_variables WHERE owner = ?)",
        (to, owner, to),
    )
    await db.execute("DELETE FROM global_variables WHERE owner = ?", (owner,))
    await db.execute("DELETE FROM settings WHERE owner = ?", (owner,))


async def _move_storage_use(db: SqliteConnection, owner: str, to: str) -> None:
    """Count what ``owner`` handed over as ``to``'s stored bytes. The usage triggers follow
    content, not a change of owner; what was deleted instead (settings, variables ``to``
    already had) was taken off ``owner``'s count by them, so the rest is what moved."""
    await db.execute(
        "INSERT INTO storage_use (owner, bytes) SELECT ?, bytes FROM storage_use "
        "WHERE owner = ? ON CONFLICT (owner) DO UPDATE "
        "SET bytes = storage_use.bytes + excluded.bytes",
        (to, owner),
    )


class SqliteAccounts(SqliteBase):
    async def create_user(
        self, name: str, password_hash: str, *, owner: str, is_admin: bool = False
    ) -> UserRecord:
        if not name.strip():
            raise StoreError("a user needs a name")
        user_id = self._new_id()
        now = self._now()
        try:
            async with self._write() as db:
                await db.execute(
                    "INSERT INTO users (id, name, name_key, owner, password_hash, is_admin, "
                    "created) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        user_id,
                        name.strip(),
                        _name_key(name),
                        owner,
                        password_hash,
                        int(is_admin),
                        now,
                    ),
                )
        except Conflict:
            raise Conflict(f"a user named {name.strip()!r} (or that owner) exists") from None
        return UserRecord(user_id, name.strip(), owner, is_admin, datetime.fromisoformat(now), True)

    async def get_user(self, user_id: str) -> UserRecord:
        async with (
            self._read() as db,
            db.execute(f"SELECT {_USER_COLUMNS} FROM users WHERE id = ?", (user_id,)) as cur,
        ):
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no user {user_id!r}")
        return _user(tuple(row))

    async def find_user(self, name: str) -> tuple[UserRecord, str]:
        async with (
            self._read() as db,
            db.execute(
                f"SELECT {_USER_COLUMNS}, password_hash FROM users WHERE name_key = ?",
                (_name_key(name),),
            ) as cur,
        ):
            row = await cur.fetchone()
        if row is None:
            raise NotFound("no such user")
        return _user(tuple(row)), str(row[6])

    async def list_users(self) -> builtins.list[UserRecord]:
        async with (
            self._read() as db,
            db.execute(f"SELECT {_USER_COLUMNS} FROM users ORDER BY name_key") as cur,
        ):
            return [_user(tuple(r)) for r in await cur.fetchall()]

    async def count_users(self) -> int:
        async with self._read() as db, db.execute("SELECT COUNT(*) FROM users") as cur:
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def set_password_hash(self, user_id: str, password_hash: str) -> None:
        async with self._write() as db:
            cur = await db.execute(
                "UPDATE users SET password_hash = ? WHERE id = ?", (password_hash, user_id)
            )
            if cur.rowcount == 0:
                raise NotFound(f"no user {user_id!r}")

    async def change_password(
        self,
        user_id: str,
        password_hash: str,
        *,
        keep_session_id: str | None = None,
        keep_token_hash: str | None = None,
    ) -> None:
        async with self._write() as db:
            cur = await db.execute(
                "UPDATE users SET password_hash = ? WHERE id = ?", (password_hash, user_id)
            )
            if cur.rowcount == 0:
                raise NotFound(f"no user {user_id!r}")
            # '' matches no id and no hash: nothing is kept when the caller has none
            await db.execute(
                "DELETE FROM sessions WHERE user_id = ? AND id <> ?",
                (user_id, keep_session_id or ""),
            )
            await db.execute(
                "DELETE FROM api_tokens WHERE user_id = ? AND token_hash <> ?",
                (user_id, keep_token_hash or ""),
            )

    async def set_shared_fallback(self, user_id: str, allowed: bool) -> None:
        async with self._write() as db:
            cur = await db.execute(
                "UPDATE users SET shared_fallback = ? WHERE id = ?", (int(allowed), user_id)
            )
            if cur.rowcount == 0:
                raise NotFound(f"no user {user_id!r}")

    async def delete_user(self, user_id: str, *, hand_over_to: str | None = None) -> None:
        if hand_over_to == user_id:
            raise StoreError("a user's records cannot be handed over to that same user")
        async with self._write() as db:
            owner = await _owner_of(db, user_id)
            if hand_over_to is None:
                key_ids = await _delete_owned(db, owner)
            else:
                receiver = await _owner_of(db, hand_over_to)
                await self._seal_keys_for(db, owner, receiver)
                await _hand_over(db, owner, receiver)
                await _move_storage_use(db, owner, receiver)
                key_ids = []
            await db.execute("DELETE FROM storage_use WHERE owner = ?", (owner,))
            await db.execute("DELETE FROM record_counts WHERE owner = ?", (owner,))
            # the user's API tokens and sessions go with the row (ON DELETE CASCADE)
            await db.execute("DELETE FROM users WHERE id = ?", (user_id,))
        self._forget_key_secrets(key_ids)

    async def add_token(self, user_id: str, token_hash: str, *, label: str) -> TokenRecord:
        token_id = self._new_id()
        now = self._now()
        async with self._write() as db:
            await db.execute(
                "INSERT INTO api_tokens (id, user_id, token_hash, label, created) "
                "VALUES (?, ?, ?, ?, ?)",
                (token_id, user_id, token_hash, label, now),
            )
        return TokenRecord(token_id, user_id, label, datetime.fromisoformat(now), None)

    async def list_tokens(self, user_id: str) -> builtins.list[TokenRecord]:
        async with (
            self._read() as db,
            db.execute(
                "SELECT id, user_id, label, created, last_used FROM api_tokens "
                "WHERE user_id = ? ORDER BY created, id",
                (user_id,),
            ) as cur,
        ):
            return [_token(tuple(r)) for r in await cur.fetchall()]

    async def delete_token(self, user_id: str, token_id: str) -> None:
        async with self._write() as db:
            cur = await db.execute(
                "DELETE FROM api_tokens WHERE id = ? AND user_id = ?", (token_id, user_id)
            )
            if cur.rowcount == 0:
                raise NotFound(f"no token {token_id!r}")

    async def user_for_token(self, token_hash: str) -> UserRecord | None:
        columns = ", ".join("u." + c.strip() for c in _USER_COLUMNS.split(","))
        async with (
            self._read() as db,
            db.execute(
                f"SELECT t.id, t.last_used, {columns} FROM api_tokens t "
                "JOIN users u ON u.id = t.user_id WHERE t.token_hash = ?",
                (token_hash,),
            ) as cur,
        ):
            row = await cur.fetchone()
        if row is None:
            return None
        now = self._clock()
        # a request is a read: its token's last use is written at most once a minute
        if row[1] is None or now - datetime.fromisoformat(str(row[1])) > _EXTEND_STEP:
            async with self._write() as db:
                await db.execute(
                    "UPDATE api_tokens SET last_used = ? WHERE id = ?", (now.isoformat(), row[0])
                )
        return _user(tuple(row)[2:])

    async def create_session(
        self, user_id: str, session_hash: str, *, expires: datetime
    ) -> SessionRecord:
        session_id = self._new_id()
        now = self._now()
        async with self._write() as db:
            await db.execute(
                "INSERT INTO sessions (id, user_id, session_hash, created, expires) "
                "VALUES (?, ?, ?, ?, ?)",
                (session_id, user_id, session_hash, now, expires.isoformat()),
            )
        return SessionRecord(session_id, user_id, datetime.fromisoformat(now), expires)

    async def user_for_session(
        self,
        session_hash: str,
        *,
        now: datetime,
        extend_to: datetime,
        started_after: datetime | None = None,
    ) -> tuple[SessionRecord, UserRecord] | None:
        async with self._write() as db:
            async with db.execute(
                "SELECT s.id, s.user_id, s.created, s.expires, "
                f"{', '.join('u.' + c.strip() for c in _USER_COLUMNS.split(','))} "
                "FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.session_hash = ?",
                (session_hash,),
            ) as cur:
                row = await cur.fetchone()
            if row is None:
                return None
            expires = datetime.fromisoformat(str(row[3]))
            too_old = started_after is not None and (
                datetime.fromisoformat(str(row[2])) <= started_after
            )
            if expires <= now or too_old:
                await db.execute("DELETE FROM sessions WHERE id = ?", (row[0],))
                return None
            if extend_to - expires > _EXTEND_STEP:
                expires = extend_to
                await db.execute(
                    "UPDATE sessions SET expires = ? WHERE id = ?", (expires.isoformat(), row[0])
                )
        session = SessionRecord(
            str(row[0]), str(row[1]), datetime.fromisoformat(str(row[2])), expires
        )
        return session, _user(tuple(row)[4:])

    async def delete_session(self, session_hash: str) -> None:
        async with self._write() as db:
            await db.execute("DELETE FROM sessions WHERE session_hash = ?", (session_hash,))
