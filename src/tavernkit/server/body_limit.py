"""A cap on request bodies, enforced while they arrive: a body announced larger than the cap
is refused before a byte of it is read, and one that grows past it (chunked, or lying about
its length) is cut off there, so an upload never fills memory or the temp folder first.
Either way the client gets 413: with the server's typed error body, or the error body the
routes under a path prefix answer their errors in (``error_bodies``: the OpenAI facade's shape,
as its clients parse it)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tavernkit.error_params import http_params
from tavernkit.server.errors import error_body

__all__ = ["BodyLimit"]

_JSON = [(b"content-type", b"application/json")]


def _too_large(limit: int) -> str:
    return f"the request body is larger than the server's limit of {limit} bytes"


def _server_error(message: str) -> dict[str, Any]:
    code, params = http_params(413, message)
    return error_body("LimitExceeded", message, code=code, params=params)


ErrorBody = Callable[[str], dict[str, Any]]


class BodyLimit:
    """``app`` under the cap. The 413's body of a body refused on its ``Content-Length`` is
    made from the message by ``error_bodies``' entry for the first path prefix that matches,
    else the server's typed error (one cut off later is the app's ``HTTPException``, which
    the route answers in its own shape)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_bytes: int,
        error_bodies: Mapping[str, ErrorBody] | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.error_bodies = dict(error_bodies or {})

    def error_body(self, path: str) -> ErrorBody:
        for prefix, body in self.error_bodies.items():
            if path.startswith(prefix):
                return body
        return _server_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                await _refuse(send, self.error_body(scope["path"])(_too_large(limit)))
                return
        seen = 0

        async def capped() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    # an HTTPException passes through FastAPI's body parsing unchanged
                    raise HTTPException(413, _too_large(limit))
            return message

        await self.app(scope, capped, send)


async def _refuse(send: Send, error: dict[str, Any]) -> None:
    body = json.dumps(error).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [*_JSON, (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
