"""``Principal``: who a request acts for, as every route sees it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["LOCAL_USER_ID", "PRINCIPAL_SCOPE_KEY", "Principal", "Via"]

#: how the caller proved who it is: the local single-user mode (no login), a bearer API
#: token, or a browser session cookie
Via = Literal["local", "token", "session"]

#: the user id of the local single-user mode (accounts off)
LOCAL_USER_ID = "local"

#: where a request's principal is kept in its ASGI scope once known (the access log reads it)
PRINCIPAL_SCOPE_KEY = "tavernkit.principal"


@dataclass(frozen=True, slots=True)
class Principal:
    """The user a request acts for. ``owner`` is the store owner its data lives under (every
    route reads and writes only that owner's records); ``via`` says how it signed in;
    ``session_id`` is set for cookie sessions (what CSRF checks and logout need)."""

    user_id: str
    owner: str
    is_admin: bool
    via: Via
    name: str = ""
    session_id: str | None = None
