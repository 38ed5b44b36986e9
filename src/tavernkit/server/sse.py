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
    """``frames``, with a comment line after ``ping_s`` seconds (at most twice that) without
    a frame: proxies and phones drop idle connections.

    One task reads ``frames`` into a queue and one timer per ``ping_s`` checks whether
    anything was sent since its last tick; a frame costs a queue put and get, not a task or a
    timeout of its own (the streams are the server's hottest path)."""
    queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    quiet = [True]  # nothing sent since the last tick
    timer: asyncio.TimerHandle | None = None

    async def pump() -> None:
        try:
            async for frame in frames:
                queue.put_nowait(frame)
        except Exception as exc:
            queue.put_nowait(exc)
            return
        queue.put_nowait(None)

    def tick() -> None:
        nonlocal timer
        if quiet[0]:
            queue.put_nowait(_PING)
        quiet[0] = True
        timer = loop.call_later(ping_s, tick)

    reader = asyncio.create_task(pump())
    timer = loop.call_later(ping_s, tick)
    try:
        while True:
            item = await queue.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            quiet[0] = False
            yield item
    finally:
        if timer is not None:
            timer.cancel()
        if not reader.done():
            reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


def sse_response(
    frames: AsyncIterator[bytes], *, ping_s: float | None = 15.0, status_code: int = 200
) -> StreamingResponse:
    body = with_keepalive(frames, ping_s) if ping_s else frames
    return StreamingResponse(
        body, status_code=status_code, media_type="text/event-stream", headers=SSE_HEADERS
    )
