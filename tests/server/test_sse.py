"""The SSE response: frames sent from the request's own task as they come, pings on a quiet
stream (never dropping or reordering a frame), a quiet end when the client leaves."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tavernkit.server.sse import PING, SSEResponse, sse_data, sse_event

SCOPE: dict[str, Any] = {"type": "http", "method": "GET", "path": "/", "headers": []}


class Client:
    """An ASGI server's side of one response: what was sent, from which task, and a
    ``leave`` that makes ``receive`` answer ``http.disconnect``."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.tasks: list[asyncio.Task[Any] | None] = []
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        self.tasks.append(asyncio.current_task())

    def bodies(self) -> list[bytes]:
        return [m["body"] for m in self.sent if m["type"] == "http.response.body"]


async def test_frames_go_out_from_the_callers_task_in_order_then_the_end() -> None:
    async def frames() -> AsyncIterator[bytes]:
        yield b"a"
        yield b"b"

    client = Client()
    await SSEResponse(frames())(SCOPE, client.receive, client.send)
    start = client.sent[0]
    assert start["type"] == "http.response.start" and start["status"] == 200
    assert (b"content-type", b"text/event-stream; charset=utf-8") in start["headers"]
    assert (b"cache-control", b"no-cache") in start["headers"]
    assert client.bodies() == [b"a", b"b", b""]
    assert client.sent[-1]["more_body"] is False
    # no task between the source and the send: every send is the caller's own
    assert set(client.tasks) == {asyncio.current_task()}


async def test_a_quiet_stream_gets_pings_and_loses_no_frame() -> None:
    async def frames() -> AsyncIterator[bytes]:
        yield b"a"
        await asyncio.sleep(0.12)  # quiet for several ping intervals
        yield b"b"

    client = Client()
    await SSEResponse(frames(), ping_s=0.03)(SCOPE, client.receive, client.send)
    out = client.bodies()
    assert out[0] == b"a" and out[-2:] == [b"b", b""]
    assert 1 <= out.count(PING) <= 4 and len(out) == out.count(PING) + 3


async def test_no_ping_without_ping_s() -> None:
    async def frames() -> AsyncIterator[bytes]:
        await asyncio.sleep(0.05)
        yield b"a"

    client = Client()
    await SSEResponse(frames(), ping_s=None)(SCOPE, client.receive, client.send)
    assert client.bodies() == [b"a", b""]


async def test_an_error_in_the_frames_reaches_the_caller() -> None:
    async def frames() -> AsyncIterator[bytes]:
        yield b"a"
        raise RuntimeError("boom")

    client = Client()
    with pytest.raises(RuntimeError, match="boom"):
        await SSEResponse(frames())(SCOPE, client.receive, client.send)
    assert client.bodies() == [b"a"]


async def test_the_client_leaving_closes_the_source_and_ends_quietly() -> None:
    closed = asyncio.Event()

    async def frames() -> AsyncIterator[bytes]:
        try:
            yield b"a"
            await asyncio.sleep(30)  # a turn that goes on
            yield b"never"
        finally:
            closed.set()

    client = Client()
    response = asyncio.ensure_future(SSEResponse(frames())(SCOPE, client.receive, client.send))
    await asyncio.sleep(0.01)
    client.gone.set()
    await asyncio.wait_for(response, 2)  # returns, without a CancelledError
    assert closed.is_set() and client.bodies() == [b"a"]
    assert not response.cancelled()


async def test_a_cancel_from_elsewhere_still_cancels() -> None:
    async def frames() -> AsyncIterator[bytes]:
        yield b"a"
        await asyncio.sleep(30)
        yield b"never"

    client = Client()
    response = asyncio.ensure_future(SSEResponse(frames())(SCOPE, client.receive, client.send))
    await asyncio.sleep(0.01)
    response.cancel()  # a server shutting down
    with pytest.raises(asyncio.CancelledError):
        await response


def test_frames_are_one_json_line_each() -> None:
    assert (
        sse_event("3", "text", {"text": "a\nb"})
        == b'id: 3\nevent: text\ndata: {"text":"a\\nb"}\n\n'
    )
    assert sse_data("[DONE]") == b"data: [DONE]\n\n"
