"""Server-sent events framing, and a response that streams them with keep-alive comments.

Written here rather than taken from a library because the framing is three lines and the
streams are the server's hottest path: one ``bytes`` per event, no per-event objects.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from starlette.responses import StreamingResponse

__all__ = ["SSE_HEADERS", "sse_data", "sse_event", "sse_response", "with_keepalive"]

#: no proxy buffering or caching of a live stream
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}

_PING = b": ping\n\n"


def sse_event(event_id: str | None, event: str, data: Mapping[str, Any]) -> bytes:
    """One event: ``id``, ``event`` and its JSON ``data`` on one line (JSON has no raw
    newlines, so one ``data:`` line always holds it)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"{head}event: {event}\ndata: {body}\n\n".encode()


def sse_data(data: Mapping[str, Any] | str) -> bytes:
    """A data-only event (what OpenAI's streams are): JSON, or a literal like ``[DONE]``."""
    body = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {body}\n\n".encode()


async def with_keepalive(frames: AsyncIterator[bytes], ping_s: float) -> AsyncIterator[bytes]:
    """``frames``, with a comment line after every ``ping_s`` seconds of silence (proxies and
    phones drop idle connections). The pending read is kept across pings, never cancelled,
    so no event is lost to a ping."""
    pending: asyncio.Future[bytes] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(frames))
            done, _ = await asyncio.wait((pending,), timeout=ping_s)
            if not done:
                yield _PING
                continue
            try:
                frame = pending.result()
            except StopAsyncIteration:
                return
            finally:
                pending = None
            yield frame
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending


def sse_response(
    frames: AsyncIterator[bytes], *, ping_s: float | None = 15.0, status_code: int = 200
) -> StreamingResponse:
    body = with_keepalive(frames, ping_s) if ping_s else frames
    return StreamingResponse(
        body, status_code=status_code, media_type="text/event-stream", headers=SSE_HEADERS
    )
