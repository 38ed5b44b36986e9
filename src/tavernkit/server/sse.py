"""Server-sent events framing, and the response that streams them with keep-alive comments.

Written here rather than taken from a library because the framing is three lines and the
streams are the server's hottest path: one ``bytes`` per event, no per-event objects.

:class:`SSEResponse` sends each frame from the request's own task as the frame source yields
it: no task or queue between the source and the socket (Starlette's ``StreamingResponse``,
on uvicorn's ASGI 2.3, streams from a task group's child task, one more wake-up before the
first frame). A watcher task on ``receive`` stops the stream when the client leaves, and
a timer sends a ping comment through the same send when nothing went out for a while.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

__all__ = ["PING", "SSE_HEADERS", "SSEResponse", "sse_data", "sse_event", "sse_response"]

#: no proxy buffering or caching of a live stream
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}

#: the keep-alive comment a quiet stream gets
PING = b": ping\n\n"


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


class SSEResponse(Response):
    """``frames`` as a ``text/event-stream`` body, each frame sent as it comes.

    With ``ping_s``, a stream quiet for ``ping_s`` seconds (at most twice that) gets a
    :data:`PING` comment: proxies and phones drop idle connections. When the client
    disconnects, the frame source is cancelled where it waits and closed (its ``finally``
    runs), and the response ends quietly; an error of the source propagates once the
    response is closed as far as it got."""

    media_type = "text/event-stream"

    def __init__(
        self, frames: AsyncIterator[bytes], *, ping_s: float | None = 15.0, status_code: int = 200
    ) -> None:
        self.frames = frames
        self.ping_s = ping_s
        self.status_code = status_code
        self.background = None
        self.init_headers(SSE_HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stream = _Stream(send, asyncio.current_task())
        watcher = asyncio.create_task(stream.watch(receive))
        if self.ping_s:
            stream.ping_every(self.ping_s)
        try:
            await stream.run(self.raw_headers, self.status_code, self.frames)
        finally:
            stream.end()
            watcher.cancel()
            with contextlib.suppress(Exception):
                await self.frames.aclose()  # type: ignore[attr-defined]


class _Stream:
    """One response's send side: the frames, the pings and the client's leaving."""

    def __init__(self, send: Send, task: asyncio.Task[Any] | None) -> None:
        self.send = send
        self.task = task
        self.over = False  # no more sends, and no cancelling the task from here on
        self.left = False  # the client disconnected (and the task was cancelled for it)
        self.quiet = True  # nothing sent since the last ping tick
        #: a ping goes out from a task of its own: the lock keeps it between two frames
        self.lock = asyncio.Lock()
        self.timer: asyncio.TimerHandle | None = None
        self.pings: set[asyncio.Task[None]] = set()

    async def run(
        self, headers: list[tuple[bytes, bytes]], status: int, frames: AsyncIterator[bytes]
    ) -> None:
        try:
            await self._send({"type": "http.response.start", "status": status, "headers": headers})
            async for frame in frames:
                await self._send({"type": "http.response.body", "body": frame, "more_body": True})
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})
            self.over = True  # set with no await after the last send: a late leave is no cancel
        except asyncio.CancelledError:
            self.over = True
            # the watcher's cancel is ours to absorb; any other one (shutdown) goes on
            if not self.left or self.task is None or self.task.uncancel() > 0:
                raise

    async def _send(self, message: dict[str, Any]) -> None:
        self.quiet = False
        async with self.lock:  # uncontended (no ping sending) it never suspends
            await self.send(message)

    async def watch(self, receive: Receive) -> None:
        try:
            while (await receive())["type"] != "http.disconnect":
                pass
        except Exception:  # a connection that cannot be read is one the client left
            pass
        if not self.over and self.task is not None:
            self.left = True
            self.task.cancel()

    def ping_every(self, ping_s: float) -> None:
        loop = asyncio.get_running_loop()

        def tick() -> None:
            if self.quiet and not self.pings and not self.over:
                ping = loop.create_task(self._ping())
                self.pings.add(ping)
                ping.add_done_callback(self.pings.discard)
            self.quiet = True
            self.timer = loop.call_later(ping_s, tick)

        self.timer = loop.call_later(ping_s, tick)

    async def _ping(self) -> None:
        async with self.lock:
            if not self.over:
                with contextlib.suppress(Exception):  # the client is gone: the stream ends
                    await self.send({"type": "http.response.body", "body": PING, "more_body": True})

    def end(self) -> None:
        self.over = True
        if self.timer is not None:
            self.timer.cancel()
        for ping in list(self.pings):
            ping.cancel()


def sse_response(
    frames: AsyncIterator[bytes], *, ping_s: float | None = 15.0, status_code: int = 200
) -> SSEResponse:
    """``frames`` as an :class:`SSEResponse`."""
    return SSEResponse(frames, ping_s=ping_s, status_code=status_code)
