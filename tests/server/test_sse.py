"""The SSE keep-alive: pings a quiet stream, never drops or reorders a frame."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from tavernkit.server.sse import sse_data, sse_event, with_keepalive


async def test_keepalive_pings_a_quiet_stream_and_loses_no_frame() -> None:
    async def frames() -> AsyncIterator[bytes]:
        yield b"a"
        await asyncio.sleep(0.12)  # quiet for several ping intervals
        yield b"b"

    out = [f async for f in with_keepalive(frames(), 0.03)]
    assert out[0] == b"a" and out[-1] == b"b"
    assert 1 <= out.count(b": ping\n\n") <= 4 and len(out) == out.count(b": ping\n\n") + 2


async def test_an_error_in_the_frames_reaches_the_reader() -> None:
    async def frames() -> AsyncIterator[bytes]:
        yield b"a"
        raise RuntimeError("boom")

    seen: list[bytes] = []
    try:
        async for frame in with_keepalive(frames(), 10):
            seen.append(frame)
    except RuntimeError as exc:
        assert str(exc) == "boom"
    else:
        raise AssertionError("the error was swallowed")
    assert seen == [b"a"]


def test_frames_are_one_json_line_each() -> None:
    assert (
        sse_event("3", "text", {"text": "a\nb"})
        == b'id: 3\nevent: text\ndata: {"text":"a\\nb"}\n\n'
    )
    assert sse_data("[DONE]") == b"data: [DONE]\n\n"
