"""Who a request is: the ``current_principal`` dependency every route uses, and
``tavern_for`` (the principal's own Tavern).

With accounts off (loopback only, see :class:`~tavernkit.server.settings.ServerSettings`)
every request is the one local user, but only when it is addressed to a loopback name (the
``Host`` header: a DNS-rebinding page gets a 403) and, for a change, when it comes from no
other origin (the ``Origin`` header: another site's form posting to localhost gets a 403).

With accounts on, a request proves who it is with ``Authorization: Bearer tk_...`` (an API
token) or the session cookie a login set; a cookie request that changes something (any method
but GET, HEAD, OPTIONS) must also carry the session's ``X-CSRF-Token``.
"""

from __future__ import annotations

import hmac
from functools import lru_cache
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Request

from tavernkit.errors import NotAuthenticated, PermissionDenied
from tavernkit.facade import Tavern
from tavernkit.server.accounts import csrf_for
from tavernkit.server.principal import LOCAL_USER_ID, PRINCIPAL_SCOPE_KEY, Principal
from tavernkit.server.settings import is_loopback
from tavernkit.server.state import ServerState, state_of

__all__ = [
    "CSRF_HEADER",
    "SESSION_COOKIE",
    "AdminPrincipal",
    "CurrentPrincipal",
    "UserTavern",
    "admin_principal",
    "current_principal",
    "tavern_for",
]

SESSION_COOKIE = "tavernkit_session"
CSRF_HEADER = "X-CSRF-Token"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _host_name(netloc: str) -> str:
    return urlsplit(f"//{netloc}").hostname or ""


# a client sends the same few Host and Origin values, and parsing them is most of this check
@lru_cache(maxsize=256)
def _loopback_host(host: str) -> bool:
    return is_loopback(_host_name(host))


@lru_cache(maxsize=256)
def _loopback_origin(origin: str) -> bool:
    return is_loopback(_host_name(urlsplit(origin).netloc))


def _local_principal(request: Request, state: ServerState) -> Principal:
    host = request.headers.get("host", "")
    if host and not _loopback_host(host):
        raise PermissionDenied(f"this server answers only to a loopback host name, not {host!r}")
    origin = request.headers.get("origin")
    foreign = bool(origin) and not _loopback_origin(origin or "")
    if request.method not in _SAFE_METHODS and foreign:
        raise PermissionDenied("a change from another site's page is refused")
    return Principal(
        user_id=LOCAL_USER_ID, owner=state.tavern.owner, is_admin=True, via="local", name="local"
    )


#: where a request's principal is kept once known (the ASGI scope is the request's own)
_PRINCIPAL_KEY = PRINCIPAL_SCOPE_KEY


async def current_principal(request: Request) -> Principal:
    """The principal of the request; raises :class:`~tavernkit.errors.NotAuthenticated`
    (401) or :class:`~tavernkit.errors.PermissionDenied` (403, a missing CSRF token).

    Found once per request: the other dependencies that need it (:func:`tavern_for`,
    :func:`admin_principal`) take it from the request rather than from a dependency of their
    own, so a route's dependencies are a few flat nodes for FastAPI to solve."""
    known = request.scope.get(_PRINCIPAL_KEY)
    if isinstance(known, Principal):
        return known
    principal = await _authenticate(request, state_of(request))
    request.scope[_PRINCIPAL_KEY] = principal
    return principal


async def _authenticate(request: Request, state: ServerState) -> Principal:
    if not state.settings.accounts:
        return _local_principal(request, state)
    authorization = request.headers.get("authorization")
    if authorization is not None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise NotAuthenticated("the Authorization header must be 'Bearer <token>'")
        principal = await state.accounts.principal_for_token(token.strip())
        if principal is None:
            raise NotAuthenticated("unknown or revoked API token", refusal="unknown_token")
        return principal
    secret = request.cookies.get(SESSION_COOKIE)
    if not secret:
        raise NotAuthenticated(
            "sign in (POST /auth/login) or send an API token", refusal="signed_out"
        )
    principal = await state.accounts.principal_for_session(secret)
    if principal is None:
        raise NotAuthenticated(
            "the session has expired or was signed out; sign in again", refusal="session_expired"
        )
    if request.method not in _SAFE_METHODS:
        sent = request.headers.get(CSRF_HEADER, "")
        if not hmac.compare_digest(sent.encode(), csrf_for(secret).encode()):
            raise PermissionDenied(f"a change made with a session needs its {CSRF_HEADER} header")
    return principal


CurrentPrincipal = Annotated[Principal, Depends(current_principal)]


async def admin_principal(request: Request) -> Principal:
    """:func:`current_principal`, refusing anyone but an admin (403)."""
    principal = await current_principal(request)
    if not principal.is_admin:
        raise PermissionDenied("only an admin may do this", refusal="admin_only")
    return principal


#: the methods that may store something: held to the user's storage quota
_STORING = frozenset({"POST", "PUT", "PATCH"})


async def tavern_for(request: Request) -> Tavern:
    """The principal's own Tavern (the dependency resource routes take). A request that may
    store something is refused (413) first when the user's stored bytes plus its body would
    pass their storage quota (:meth:`ServerState.admit_storage`)."""
    principal = await current_principal(request)
    state = state_of(request)
    if request.method in _STORING:
        length = request.headers.get("content-length", "")
        await state.admit_storage(principal, int(length) if length.isdigit() else 0)
    return state.tavern_for(principal)


#: what a route's parameters say: ``tk: UserTavern``, ``who: CurrentPrincipal``
UserTavern = Annotated[Tavern, Depends(tavern_for)]
AdminPrincipal = Annotated[Principal, Depends(admin_principal)]
