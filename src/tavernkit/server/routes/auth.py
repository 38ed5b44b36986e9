"""Sign-in and accounts: ``/auth/login``, ``/auth/logout``, ``/auth/me``, the caller's API
tokens (``/auth/tokens``) and password (``/auth/password``) and, for admins, users
(``/users``, a user's password reset at ``/users/{id}/password``).

A password change or reset signs out whoever held the old password: every session and API
token of the user ends, but the caller's own (the session or token the change came with)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel, Field

from tavernkit.errors import FormatError, NotAuthenticated, PermissionDenied, ServerConfigError
from tavernkit.server.accounts import csrf_for
from tavernkit.server.auth import SESSION_COOKIE, AdminPrincipal, CurrentPrincipal
from tavernkit.server.principal import Principal
from tavernkit.server.state import ServerState, server_state
from tavernkit.store.accounts import TokenRecord, UserRecord

__all__ = ["router"]

router = APIRouter(tags=["accounts"])
State = Annotated[ServerState, Depends(server_state)]


class LoginRequest(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    password: str = Field(min_length=1, max_length=1024)


class Me(BaseModel):
    user_id: str
    name: str
    is_admin: bool
    via: str
    #: the session's CSRF token (cookie sessions only): send it as ``X-CSRF-Token``
    csrf_token: str | None = None


class User(BaseModel):
    id: str
    name: str
    is_admin: bool
    created: datetime

    @classmethod
    def of(cls, user: UserRecord) -> User:
        return cls(id=user.id, name=user.name, is_admin=user.is_admin, created=user.created)


class NewUser(BaseModel):
    #: NFKC-normalized and trimmed; one with an invisible or control character is a 422
    name: str = Field(min_length=1, max_length=200)
    #: the account rules' (a 422 naming ``password`` when too short or a common password)
    password: str = Field(max_length=1024)
    is_admin: bool = False


class PasswordChange(BaseModel):
    #: the password now (a wrong one is a 403, and nothing changes)
    old_password: str = Field(min_length=1, max_length=1024)
    #: at least the account rules' length (a 422 naming ``new_password`` otherwise)
    new_password: str = Field(max_length=1024)


class PasswordReset(BaseModel):
    password: str = Field(max_length=1024)


class Token(BaseModel):
    id: str
    label: str
    created: datetime
    last_used: datetime | None

    @classmethod
    def of(cls, record: TokenRecord) -> Token:
        return cls(
            id=record.id, label=record.label, created=record.created, last_used=record.last_used
        )


class NewToken(BaseModel):
    label: str = Field(default="", max_length=200)


class IssuedTokenBody(Token):
    #: the token itself: shown in this answer only, never again
    token: str


def _me(principal: Principal, request: Request) -> Me:
    csrf = None
    secret = request.cookies.get(SESSION_COOKIE)
    if principal.via == "session" and secret:
        csrf = csrf_for(secret)
    return Me(
        user_id=principal.user_id,
        name=principal.name,
        is_admin=principal.is_admin,
        via=principal.via,
        csrf_token=csrf,
    )


def _bearer(principal: Principal, request: Request) -> str | None:
    """The API token the request came with (``None`` for a cookie session)."""
    if principal.via != "token":
        return None
    return request.headers.get("authorization", "").partition(" ")[2].strip() or None


def _accounts_on(state: ServerState) -> None:
    if not state.settings.accounts:
        raise ServerConfigError("accounts are off: this server has one local user, no logins")


@router.post("/auth/login")
async def login(body: LoginRequest, request: Request, response: Response, state: State) -> Me:
    """Sign in with a name and password: sets the HttpOnly session cookie and answers the
    session's CSRF token (401 for a wrong name or password; 429 past the login limits: per
    name and client address, per address, and logins checked at once)."""
    _accounts_on(state)
    address = request.client.host if request.client is not None else None
    session = await state.accounts.login(body.name, body.password, address=address)
    response.set_cookie(
        SESSION_COOKIE,
        session.secret,
        max_age=int(state.settings.session_ttl_s),
        httponly=True,
        samesite="lax",
        secure=state.settings.secure_cookies,
        path="/",
    )
    return Me(
        user_id=session.user.id,
        name=session.user.name,
        is_admin=session.user.is_admin,
        via="session",
        csrf_token=session.csrf_token,
    )


@router.post("/auth/logout", status_code=204)
async def logout(
    principal: CurrentPrincipal, request: Request, response: Response, state: State
) -> None:
    """End the cookie session (a token caller revokes its token instead)."""
    secret = request.cookies.get(SESSION_COOKIE)
    if principal.via != "session" or not secret:
        raise NotAuthenticated("no session to sign out of")
    await state.accounts.logout(secret)
    response.delete_cookie(SESSION_COOKIE, path="/")


@router.get("/auth/me")
async def me(principal: CurrentPrincipal, request: Request) -> Me:
    return _me(principal, request)


class SharedFallback(BaseModel):
    #: let a turn whose own keys all failed fall back to the server's shared route
    allowed: bool


@router.get("/auth/me/shared-fallback")
async def get_shared_fallback(principal: CurrentPrincipal, state: State) -> SharedFallback:
    _accounts_on(state)
    user = await state.accounts.store.get_user(principal.user_id)
    return SharedFallback(allowed=user.shared_fallback)


@router.put("/auth/me/shared-fallback")
async def set_shared_fallback(
    body: SharedFallback, principal: CurrentPrincipal, state: State
) -> SharedFallback:
    """The caller's own setting; the admin's policy (``shared_fallback`` in the server's
    settings) can still withhold the route."""
    _accounts_on(state)
    await state.accounts.store.set_shared_fallback(principal.user_id, body.allowed)
    return body


@router.post("/auth/password", status_code=204)
async def change_password(
    body: PasswordChange, principal: CurrentPrincipal, request: Request, state: State
) -> None:
    """Change the caller's password (the old one required, under the login rate limit). The
    caller's other sessions end and their other API tokens are revoked; the session or token
    this request came with stays signed in."""
    _accounts_on(state)
    await state.accounts.change_password(
        principal.user_id,
        body.old_password,
        body.new_password,
        keep_session_id=principal.session_id,
        keep_token=_bearer(principal, request),
        address=request.client.host if request.client is not None else None,
    )


@router.get("/auth/tokens")
async def list_tokens(principal: CurrentPrincipal, state: State) -> list[Token]:
    _accounts_on(state)
    return [Token.of(t) for t in await state.accounts.store.list_tokens(principal.user_id)]


@router.post("/auth/tokens", status_code=201)
async def create_token(
    body: NewToken, principal: CurrentPrincipal, state: State
) -> IssuedTokenBody:
    """A new API token for the caller, shown in this answer only (stored hashed)."""
    _accounts_on(state)
    issued = await state.accounts.issue_token(principal.user_id, body.label)
    return IssuedTokenBody(**Token.of(issued.record).model_dump(), token=issued.token)


@router.delete("/auth/tokens/{token_id}", status_code=204)
async def delete_token(token_id: str, principal: CurrentPrincipal, state: State) -> None:
    _accounts_on(state)
    await state.accounts.store.delete_token(principal.user_id, token_id)


@router.get("/users")
async def list_users(admin: AdminPrincipal, state: State) -> list[User]:
    _accounts_on(state)
    return [User.of(u) for u in await state.accounts.store.list_users()]


@router.post("/users", status_code=201)
async def create_user(body: NewUser, admin: AdminPrincipal, state: State) -> User:
    """An admin creates a user (409 when the name is taken, whatever its case)."""
    _accounts_on(state)
    return User.of(
        await state.accounts.create_user(body.name, body.password, is_admin=body.is_admin)
    )


@router.delete("/users/{user_id}", status_code=204)
async def delete_user(
    user_id: str,
    admin: AdminPrincipal,
    state: State,
    hand_over_to: Annotated[
        str | None,
        Query(max_length=200, description="give the user's records to this user (an id)"),
    ] = None,
) -> None:
    """Delete a user: their sessions and API tokens end, and everything they own goes with
    them (characters, chats and messages, lorebooks, presets, personas, profiles, API keys and
    their secrets, memory vectors, variables, settings). With ``hand_over_to`` those records,
    chats, keys and vectors go to that user instead (409 when one of the records has a name
    that user already has for its kind, and nothing changes). An admin cannot delete
    themselves."""
    _accounts_on(state)
    if user_id == admin.user_id:
        raise PermissionDenied("an admin cannot delete their own account")
    if hand_over_to == user_id:
        raise FormatError(
            "a user's records cannot be handed over to that same user", field="hand_over_to"
        )
    store = state.accounts.store
    user = await store.get_user(user_id)
    if hand_over_to is not None:
        await store.get_user(hand_over_to)  # 404 before anything ends
    # their chat memory's background work settles and their MCP servers close first
    await state.tavern.forget_owner(user.owner)
    await store.delete_user(user_id, hand_over_to=hand_over_to)


@router.post("/users/{user_id}/password", status_code=204)
async def reset_password(
    user_id: str, body: PasswordReset, admin: AdminPrincipal, request: Request, state: State
) -> None:
    """An admin sets a user's password: every session and API token of that user ends (an
    admin resetting their own keeps the session or token of this request)."""
    _accounts_on(state)
    own = user_id == admin.user_id
    await state.accounts.reset_password(
        user_id,
        body.password,
        keep_session_id=admin.session_id if own else None,
        keep_token=_bearer(admin, request) if own else None,
    )
