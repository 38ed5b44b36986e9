"""Reading a streamed HTTP body with the three timeouts that matter, and cancellation.

- ``connect``: opening the connection (httpx2's own connect timeout);
- ``first_byte``: from sending the request until the first *data* event;
- ``idle``: between two data events. SSE comments and keep-alive pings do not count: a server
  that sends ``: keep-alive`` forever while generating nothing must still time out (DeepSeek's
  keep-alives once held a 300 s watchdog open for 17 minutes).

Cancellation (the ``abort`` event, or cancelling the task) ends the read at once; the caller's
``async with`` / ``finally`` closes the response, which closes the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import httpx2

from tavernkit.errors import Aborted as Aborted
from tavernkit.errors import ProtocolError
from tavernkit.errors import StreamTimeout as StreamTimeout
from tavernkit.log_redaction import install as install_log_redaction
from tavernkit.providers.sse import SSEDecoder, SSEEvent

__all__ = ["AbortLike", "Aborted", "StreamTimeout", "Timeouts", "iter_sse", "read_body"]

# The client logs URLs, the transport request and response details: neither may carry a key.
install_log_redaction("httpx2", "httpcore2")


@dataclass(frozen=True, slots=True)
class Timeouts:
    connect: float = 10.0
    first_byte: float = 120.0
    idle: float = 60.0
    write: float = 30.0

    def httpx(self) -> httpx2.Timeout:
        # reads are timed by us (per data event), so httpx2's read timeout stays off
        return httpx2.Timeout(connect=self.connect, read=None, write=self.write, pool=self.connect)


class AbortLike(Protocol):
    """Anything with ``is_set()`` and ``wait()``: an ``asyncio.Event`` or an abort signal."""

    def is_set(self) -> bool: ...

    async def wait(self) -> object: ...


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


async def _next_chunk(
    chunks: AsyncIterator[bytes], timeout: float, abort: AbortLike | None
) -> bytes:
    if abort is None:
        async with asyncio.timeout(timeout):
            return await anext(chunks)
    if abort.is_set():
        raise Aborted
    read = asyncio.ensure_future(anext(chunks))
    stop = asyncio.ensure_future(abort.wait())
    try:
        done, _ = await asyncio.wait({read, stop}, timeout=timeout, return_when="FIRST_COMPLETED")
    except BaseException:
        # The caller was cancelled: the read goes too, and its end (often a ReadError as the
        # response closes) is retrieved here rather than logged as never retrieved.
        read.cancel()
        read.add_done_callback(_retrieve)
        raise
    finally:
        stop.cancel()
    if read in done:
        return read.result()
    read.cancel()
    with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, httpx2.HTTPError):
        await read
    if stop in done:
        raise Aborted
    raise TimeoutError


async def iter_sse(
    response: httpx2.Response,
    decoder: SSEDecoder,
    timeouts: Timeouts,
    *,
    abort: AbortLike | None = None,
    started: float | None = None,
) -> AsyncIterator[SSEEvent]:
    """The response's SSE events, enforcing the first-byte and idle timeouts."""
    loop = asyncio.get_running_loop()
    chunks = response.aiter_bytes()
    deadline = (started if started is not None else loop.time()) + timeouts.first_byte
    phase, limit = "first_byte", timeouts.first_byte
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise StreamTimeout(phase, limit)
        try:
            chunk = await _next_chunk(chunks, remaining, abort)
        except StopAsyncIteration:
            break
        except TimeoutError:
            raise StreamTimeout(phase, limit) from None
        events = decoder.feed(chunk)
        if events:
            deadline = loop.time() + timeouts.idle
            phase, limit = "idle", timeouts.idle
            for event in events:
                yield event
    for event in decoder.flush():
        yield event


async def read_body(
    response: httpx2.Response,
    timeouts: Timeouts,
    *,
    abort: AbortLike | None = None,
    limit: int = 64 * 1024 * 1024,
) -> bytes:
    """A whole (non-streamed) body: any byte resets the idle timer; ``limit`` caps memory."""
    chunks = response.aiter_bytes()
    parts: list[bytes] = []
    size = 0
    phase, wait = "first_byte", timeouts.first_byte
    while True:
        try:
            chunk = await _next_chunk(chunks, wait, abort)
        except StopAsyncIteration:
            break
        except TimeoutError:
            raise StreamTimeout(phase, wait) from None
        size += len(chunk)
        if size > limit:
            raise ProtocolError(f"response body larger than {limit} bytes")
        parts.append(chunk)
        phase, wait = "idle", timeouts.idle
    return b"".join(parts)
