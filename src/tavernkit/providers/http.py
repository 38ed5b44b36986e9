"""Reading a streamed HTTP body with the three timeouts that matter, and cancellation.

- ``connect``: opening the connection (httpx2's own connect timeout);
- ``first_byte``: from sending the request until the first *data* event;
- ``idle``: between two data events. SSE comments and keep-alive pings do not count: a server
  that sends ``: keep-alive`` forever while generating nothing must still time out (DeepSeek's
  keep-alives once held a 300 s watchdog open for 17 minutes).

Cancellation (the ``abort`` event, or cancelling the task) ends the read at once; the caller's
``async with`` / ``finally`` closes the response, which closes the connection. The reads run in
the caller's task with no task or timer per chunk (a stream's pieces are the server's hottest
path): see :class:`_GuardedReads`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

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


class _GuardedReads:
    """The reads of one body, in the caller's task, stopped by the abort or a deadline.

    A read under way is stopped by cancelling the task it runs in (the cancellation is taken
    back once caught, and becomes :class:`Aborted` or ``TimeoutError``), so a chunk costs no
    task, future or timer of its own: one task waits on the abort and one timer on the
    deadline for the whole body; a deadline that moved on when the timer fires just re-arms
    it. Nothing is cancelled while the caller is not reading (between two chunks it may wait
    on anything); the abort and the deadline are then checked when the next read starts."""

    def __init__(self, abort: AbortLike | None) -> None:
        self.loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        self.task = task
        self.abort = abort
        self.deadline = float("inf")
        self.reading = False
        self.stopped: type[Exception] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._waiter: asyncio.Future[object] | None = None
        if abort is not None:
            self._waiter = asyncio.ensure_future(abort.wait())
            self._waiter.add_done_callback(self._on_abort)

    def _on_abort(self, waiter: asyncio.Future[object]) -> None:
        if not waiter.cancelled() and waiter.exception() is None:
            self._stop(Aborted)

    def _on_deadline(self) -> None:
        self._timer = None
        if self.loop.time() < self.deadline:
            self._timer = self.loop.call_at(self.deadline, self._on_deadline)
        else:
            self._stop(TimeoutError)

    def _stop(self, error: type[Exception]) -> None:
        if self.reading and self.stopped is None:
            self.stopped = error
            self.task.cancel()

    def _taken_back(self) -> type[Exception] | None:
        """The stop that cancelled the read, its cancellation taken back (``None``: no stop
        of ours, or the task was also cancelled by someone else, which then goes on)."""
        stopped, self.stopped = self.stopped, None
        if stopped is None or self.task.uncancel() > 0:
            return None
        return stopped

    async def next(self, chunks: AsyncIterator[bytes], deadline: float) -> bytes:
        """The next chunk; ``TimeoutError`` past ``deadline`` (loop time), :class:`Aborted`
        once the abort is set."""
        if self.abort is not None and self.abort.is_set():
            raise Aborted
        if deadline <= self.loop.time():
            raise TimeoutError
        self.deadline = deadline
        timer = self._timer
        if timer is None or timer.when() > deadline:
            if timer is not None:
                timer.cancel()
            self._timer = self.loop.call_at(deadline, self._on_deadline)
        self.reading = True
        try:
            chunk = await anext(chunks)
        except BaseException:
            self.reading = False
            stopped = self._taken_back()
            if stopped is not None:
                raise stopped from None
            raise
        self.reading = False
        if self.stopped is not None:  # the read swallowed the cancellation: still stopped
            stopped = self._taken_back()
            if stopped is not None:
                raise stopped
        return chunk

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._waiter is not None:
            self._waiter.cancel()
            self._waiter = None


async def iter_sse(
    response: httpx2.Response,
    decoder: SSEDecoder,
    timeouts: Timeouts,
    *,
    abort: AbortLike | None = None,
    started: float | None = None,
) -> AsyncIterator[SSEEvent]:
    """The response's SSE events, enforcing the first-byte and idle timeouts."""
    reads = _GuardedReads(abort)
    loop = reads.loop
    chunks = response.aiter_bytes()
    deadline = (started if started is not None else loop.time()) + timeouts.first_byte
    phase, limit = "first_byte", timeouts.first_byte
    try:
        while True:
            try:
                chunk = await reads.next(chunks, deadline)
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
    finally:
        reads.close()
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
    reads = _GuardedReads(abort)
    chunks = response.aiter_bytes()
    parts: list[bytes] = []
    size = 0
    phase, wait = "first_byte", timeouts.first_byte
    try:
        while True:
            try:
                chunk = await reads.next(chunks, reads.loop.time() + wait)
            except StopAsyncIteration:
                break
            except TimeoutError:
                raise StreamTimeout(phase, wait) from None
            size += len(chunk)
            if size > limit:
                raise ProtocolError(f"response body larger than {limit} bytes")
            parts.append(chunk)
            phase, wait = "idle", timeouts.idle
    finally:
        reads.close()
    return b"".join(parts)
