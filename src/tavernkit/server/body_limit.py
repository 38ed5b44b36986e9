"""A cap on request bodies, enforced while they arrive: a body announced larger than the cap
is refused before a byte of it is read, and one that grows past it (chunked, or lying about
its length) is cut off there, so an upload never fills memory or the temp folder first.
Either way the client gets 413 with the server's typed error body (OpenAI's error shape under
``/v1/``, the facade's prefix, as its clients parse it)."""

from __future__ import annotations

import json
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tavernkit.server.errors import error_body

__all__ = ["BodyLimit", "openai_too_large"]

_JSON = [(b"content-type", b"application/json")]


def _too_large(limit: int) -> str:
    return f"the request body is larger than the server's limit of {limit} bytes"


class BodyLimit:
    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                await _refuse(send, limit, openai=scope.get("path", "").startswith("/v1/"))
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


def openai_too_large(limit: int) -> dict[str, Any]:
    """The 413 body of the OpenAI facade (the shape of its every error)."""
    error = {"message": _too_large(limit), "type": "invalid_request_error", "param": None}
    return {"error": {**error, "code": "request_too_large"}}


async def _refuse(send: Send, limit: int, *, openai: bool) -> None:
    shaped = openai_too_large(limit) if openai else error_body("LimitExceeded", _too_large(limit))
    body = json.dumps(shaped).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [*_JSON, (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
