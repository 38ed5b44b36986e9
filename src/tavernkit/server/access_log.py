"""``AccessLog``: one JSON line per HTTP request on the ``tavernkit.access`` logger.

A line holds the method, the route's path template (``/chats/{chat_id}/turns``, so no id,
name or query string reaches the log; ``(unmatched)`` for a path no route has), the status,
the duration in milliseconds and a short hash of the signed-in user's id (``null`` when none
was established). Nothing from the headers is logged: no token, cookie or query string.
A streamed answer's line is written when its stream ends, its duration the stream's.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tavernkit.server.principal import PRINCIPAL_SCOPE_KEY, Principal

__all__ = ["ACCESS_LOGGER", "AccessLog", "log_to_stderr", "user_hash"]

ACCESS_LOGGER = "tavernkit.access"

log = logging.getLogger(ACCESS_LOGGER)


def log_to_stderr() -> None:
    """Write the access lines to stderr, one bare JSON line each (``tavernkit serve``; a
    library user's app leaves the logger to their own logging setup)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def user_hash(user_id: str) -> str:
    """A short, stable stand-in for a user id: lines of one user can be grouped, the id (an
    account's, guessable) is not written."""
    return hashlib.sha256(f"tavernkit-access:{user_id}".encode()).hexdigest()[:16]


class AccessLog:
    """ASGI middleware writing the access line of each HTTP request (see the module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not log.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # a request whose app raised before answering

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            log.info(json.dumps(_line(scope, status, time.perf_counter() - started)))


def _line(scope: Scope, status: int, duration_s: float) -> dict[str, Any]:
    route = scope.get("route")
    template = getattr(route, "path", None)
    principal = scope.get(PRINCIPAL_SCOPE_KEY)
    return {
        "method": scope.get("method"),
        "path": template if isinstance(template, str) else "(unmatched)",
        "status": status,
        "duration_ms": round(duration_s * 1000, 2),
        "user": user_hash(principal.user_id) if isinstance(principal, Principal) else None,
    }
