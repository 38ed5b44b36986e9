"""``POST /auth/login`` refused before the app does any work for it.

A storm of logins past the limits is answered 429 by :class:`~.accounts.Accounts`, before any
hashing; still, each refused login went through the routing, the body's parsing and
validation, the dependencies and the error handlers (about 1 ms of the event loop here), and
16 clients sending them back to back kept the loop busy enough to triple other requests'
latency. :class:`LoginGate`, the app's outermost middleware, asks
:meth:`~.accounts.Accounts.quick_refusal` first (is this process checking too many logins at
once; did this address's limit refuse it and its window not move since: two lookups in
memory) and answers those 429s itself. Everything else goes on as before, and the accounts
make every check again.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from tavernkit.server.errors import error_response
from tavernkit.server.state import ServerState

__all__ = ["LOGIN_PATH", "LoginGate"]

LOGIN_PATH = "/auth/login"

#: the most of a refused login's body read before answering (a login's is a few dozen bytes):
#: read whole, the connection stays usable; a longer one is left, and the connection closed
_DRAIN_BYTES = 8192


class LoginGate:
    """``app`` with refused logins answered before it sees them (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == LOGIN_PATH and scope["method"] == "POST":
            state = getattr(scope["app"].state, "server", None)
            if isinstance(state, ServerState) and state.settings.accounts:
                client = scope.get("client")
                refused = state.accounts.quick_refusal(client[0] if client else None)
                if refused is not None:
                    await _drain(receive)
                    await error_response(refused)(scope, receive, send)
                    return
        await self.app(scope, receive, send)


async def _drain(receive: Receive) -> None:
    read = 0
    while read <= _DRAIN_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return
        read += len(message.get("body", b""))
        if not message.get("more_body", False):
            return
