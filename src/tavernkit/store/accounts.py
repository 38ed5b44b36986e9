"""The server's accounts in the store: users (argon2 password hashes), their API tokens and
their browser sessions, as a protocol beside :class:`~tavernkit.store.protocol.Store` (a store
that serves a multi-user server implements both).

Only hashes are stored: a token or a session secret is shown once and kept as its SHA-256
(they are 256-bit random values, so a fast hash is enough; passwords get argon2 in
:mod:`tavernkit.server.accounts`). A user's records live under the user's ``owner``.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

__all__ = ["AccountStore", "SessionRecord", "TokenRecord", "UserRecord"]


@dataclass(frozen=True, slots=True)
class UserRecord:
    """One user; never the password hash (that has its own call)."""

    id: str
    name: str
    owner: str
    is_admin: bool
    created: datetime
    #: the user lets a turn whose own keys all failed fall back to the server's shared route
    shared_fallback: bool = True


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """One API token as listed: its label and dates, never the token or its hash."""

    id: str
    user_id: str
    label: str
    created: datetime
    last_used: datetime | None


@dataclass(frozen=True, slots=True)
class SessionRecord:
    id: str
    user_id: str
    created: datetime
    expires: datetime


@runtime_checkable
class AccountStore(Protocol):
    """Errors as the Store's: :class:`~tavernkit.errors.NotFound`,
    :class:`~tavernkit.errors.Conflict` (a taken user name),
    :class:`~tavernkit.errors.StoreError`."""

    async def create_user(
        self, name: str, password_hash: str, *, owner: str, is_admin: bool = False
    ) -> UserRecord:
        """A new user; names are unique whatever their case."""
        ...

    async def get_user(self, user_id: str) -> UserRecord: ...

    async def find_user(self, name: str) -> tuple[UserRecord, str]:
        """The user named ``name`` (any case) with its password hash: the login path."""
        ...

    async def list_users(self) -> builtins.list[UserRecord]: ...

    async def count_users(self) -> int: ...

    async def set_password_hash(self, user_id: str, password_hash: str) -> None: ...

    async def change_password(
        self,
        user_id: str,
        password_hash: str,
        *,
        keep_session_id: str | None = None,
        keep_token_hash: str | None = None,
    ) -> None:
        """Set the user's password hash and, in the same write, end every session and revoke
        every API token of theirs but the session ``keep_session_id`` and the token whose hash
        is ``keep_token_hash`` (the caller's own): whoever held the old password is signed
        out. NotFound when there is no such user."""
        ...

    async def set_shared_fallback(self, user_id: str, allowed: bool) -> None: ...

    async def delete_user(self, user_id: str, *, hand_over_to: str | None = None) -> None:
        """Delete the user with its tokens, sessions and everything its owner has (records
        and their blobs and links, chats with their messages and swipes, API keys with their
        secrets and states, memory vectors, variables, settings), in one write.

        ``hand_over_to`` (another user's id) gives that user the records, chats, API keys and
        vectors instead: refused whole (:class:`~tavernkit.errors.Conflict`, nothing changed)
        when one of the records has a name the receiver already uses for that kind; the
        receiver keeps its own settings and its variables of the same names. NotFound when
        either user does not exist."""
        ...

    async def add_token(self, user_id: str, token_hash: str, *, label: str) -> TokenRecord: ...

    async def list_tokens(self, user_id: str) -> builtins.list[TokenRecord]: ...

    async def delete_token(self, user_id: str, token_id: str) -> None:
        """Revoke one of ``user_id``'s tokens (another user's is NotFound)."""
        ...

    async def user_for_token(self, token_hash: str) -> UserRecord | None:
        """The user a token hash belongs to (None when unknown); records its last use."""
        ...

    async def create_session(
        self, user_id: str, session_hash: str, *, expires: datetime
    ) -> SessionRecord: ...

    async def user_for_session(
        self,
        session_hash: str,
        *,
        now: datetime,
        extend_to: datetime,
        started_after: datetime | None = None,
    ) -> tuple[SessionRecord, UserRecord] | None:
        """The live session with that hash and its user (None when unknown, expired or, with
        ``started_after``, created at or before that time: its absolute lifetime is over; such
        a session is deleted). Its expiry is moved to ``extend_to`` when that is more than a
        minute later, so a busy session writes at most once a minute."""
        ...

    async def delete_session(self, session_hash: str) -> None: ...
