"""The app's own part of a server's warm-up (``ServerSettings.warm_up``; the Tavern's part is
:meth:`~tavernkit.facade.Tavern.warm_up`): FastAPI builds a router's routes (their
dependencies, their parameters' validators) on the first request that walks that router, 10 to
40 ms a router, paid by whichever request comes first after the start. One request for a path
no route has walks every router: made in process before the server listens, it builds them
all (about 0.3 s for the whole API), so no user's first request of a kind pays for it."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from starlette.types import ASGIApp

__all__ = ["UNROUTED_PATH", "prime_routes"]

#: the path the priming request asks for: no route has it, so every router is walked
UNROUTED_PATH = "/.well-known/tavernkit-warm-up"


async def prime_routes(app: ASGIApp) -> int:
    """Send ``app`` one request no route answers; returns its status (404)."""
    status = 0

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])

    scope: MutableMapping[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": UNROUTED_PATH,
        "raw_path": UNROUTED_PATH.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 0),
        "state": {},
    }
    await app(scope, receive, send)
    return status
