"""Limits on the HTTP connections themselves, which uvicorn leaves open: its keep-alive timer
starts only after a first response and stops at the next request's first byte, so a client
that connects and sends nothing, or sends a request's head a byte at a time, or half a body,
held its connection for as long as it liked; and its httptools parser takes a head of any
size (2 MiB of one header, 5,000 header fields: answered 200).

:class:`ConnectionGuard` adds, through uvicorn's public seams only (its ``http=`` protocol
class and the ASGI app):

- a head timeout: a request's line and headers must have arrived ``head_timeout_s`` after the
  connection opened, or after the request's first byte on a kept-alive connection (else 408
  when part of a head came, and the connection is closed);
- a keep-alive timeout: a connection idle ``keep_alive_s`` between requests is closed;
- head limits: more than ``max_head_bytes`` or ``max_headers`` fields is a 431, closed;
- a body timeout: a request body that stops arriving for ``body_timeout_s`` ends the
  connection (the app sees the client gone);
- a cap on open connections per client address (:mod:`.addresses`); the connection past it
  is closed at once, before anything is read. The addresses uvicorn takes forwarded headers
  from (``forwarded_allow_ips``, 127.0.0.1 and ::1 unless set: a local reverse proxy) are not
  capped, as each carries many clients.

How: the protocol uvicorn makes per connection is :class:`GuardedProtocol`, which holds
uvicorn's own protocol (composed, not subclassed) and passes everything through, reading the
bytes of a head as they pass until its end (``\\n\\r\\n`` or ``\\n\\n``) to time and measure
it. A request is in progress from the moment uvicorn hands it to the app until the app
returns: the app is wrapped (:meth:`ConnectionGuard.app`), and finds its connection through a
context variable set while the connection's bytes are parsed, which the request's task
inherits (asyncio copies the context into a task when it is created). While a request is in
progress nothing but the body timeout applies (an event stream may stay open for hours). After
a request answered before its body was read whole (an error answered early), the rest of that
body still comes, and uvicorn's parser skips it: those bytes and the next head's are counted
together against the body's announced length plus ``max_head_bytes``, within
``body_timeout_s``, and the connection is closed past either.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, ClassVar, cast

from tavernkit.server.addresses import TrustedAddresses, address_key
from tavernkit.server.settings import ConnectionLimits

__all__ = ["ConnectionGuard", "GuardedProtocol"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: the end of a request's head: an empty line (CRLF, or a bare LF as parsers allow)
_HEAD_END = re.compile(rb"\n\r?\n")

#: the connection whose bytes are being parsed; a request's task inherits it
_connection: contextvars.ContextVar[_Connection | None] = contextvars.ContextVar(
    "tavernkit_connection", default=None
)


def _raw_response(status: int, reason: str, type_: str, message: str) -> bytes:
    body = json.dumps({"error": {"type": type_, "message": message}}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class ConnectionGuard:
    """The limits of one server's connections (see the module docstring): hand
    :meth:`protocol` to ``uvicorn.Config(http=)`` and serve :meth:`app` of the ASGI app.
    ``body_cap`` is the largest body a chunked request may still send after an early answer
    (the server's upload cap); ``trusted`` are the addresses the per-address cap leaves alone
    (uvicorn's ``forwarded_allow_ips``; :meth:`trust` sets them once the config is made)."""

    def __init__(
        self,
        limits: ConnectionLimits,
        *,
        body_cap: int,
        trusted: TrustedAddresses | None = None,
    ) -> None:
        self.limits = limits
        self.body_cap = body_cap
        self.trusted = trusted or TrustedAddresses()
        #: open connections per address key
        self.open: dict[str, int] = {}

    def trust(self, entries: list[str] | str) -> None:
        self.trusted = TrustedAddresses(entries)

    def protocol(self, inner: type[asyncio.Protocol]) -> type[GuardedProtocol]:
        """The protocol class for uvicorn: ``inner`` (uvicorn's own, or tavernkit's), made
        and driven per connection under this guard's limits."""

        class Guarded(GuardedProtocol):
            pass

        Guarded.guard = self
        Guarded.inner = inner
        Guarded.__name__ = Guarded.__qualname__ = f"Guarded{inner.__name__}"
        return Guarded

    def app(self, app: ASGIApp) -> ASGIApp:
        """``app`` with each HTTP request marked in progress on its connection, and its body
        read under the body timeout."""
        return _GuardedApp(app, self.limits, self.body_cap)

    def admit(self, key: str, host: str | None) -> bool:
        cap = self.limits.per_address
        if cap and host not in self.trusted and self.open.get(key, 0) >= cap:
            return False
        self.open[key] = self.open.get(key, 0) + 1
        return True

    def release(self, key: str) -> None:
        left = self.open.get(key, 0) - 1
        if left > 0:
            self.open[key] = left
        else:
            self.open.pop(key, None)


class _Connection:
    """One connection's state: waiting for a head (timed, measured) or serving requests."""

    def __init__(self, guard: ConnectionGuard, loop: asyncio.AbstractEventLoop) -> None:
        self.limits = guard.limits
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        #: requests handed to the app and not returned from it
        self.in_progress = 0
        #: a head is being read: its bytes and lines so far, the last bytes of the previous
        #: piece (an end split across two reads), whether its end passed
        self.head_bytes = 0
        self.head_lines = 0
        self.head_started = False
        self.head_done = False
        self.tail = b""
        #: waiting between two requests (keep_alive_s), not yet for a head's end
        self.idle = False
        #: after a request answered before its body was read whole: the bytes that may still
        #: come unmeasured (the rest of that body, then the next head), or None
        self.draining: int | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.closed = False

    # -- the wait for a head -----------------------------------------------------------
    def wait_for_head(self, *, first: bool) -> None:
        """From now on a request's head is awaited: within ``head_timeout_s`` on a new
        connection, after ``keep_alive_s`` of idleness plus that on a kept-alive one."""
        self.head_bytes = self.head_lines = 0
        self.head_started = self.head_done = False
        self.tail = b""
        self.idle = not first
        limits = self.limits
        self._arm(limits.head_timeout_s if first else limits.keep_alive_s)

    def _arm(self, delay: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.loop.call_later(delay, self._timed_out)

    def _timed_out(self) -> None:
        self.timer = None
        if self.in_progress or self.closed:
            return
        if self.head_started and self.draining is None:
            self.refuse(
                408, "Request Timeout", "RequestTimeout", "the request's head came too slowly"
            )
        else:
            self.close()

    def read_head(self, data: bytes) -> bool:
        """Measure ``data`` while a head is awaited; false when it broke a limit (the
        connection is answered and closed: pass nothing on)."""
        if self.in_progress or self.head_done:
            return True
        if self.draining is not None:
            # the rest of a body answered early, which uvicorn's parser skips; then the next
            # head: neither can be told apart here, so both are only counted
            self.draining -= len(data)
            if self.draining >= 0:
                return True
            self.close()
            return False
        if not self.head_started:
            # blank lines before a request line are skipped by parsers; they count as bytes
            stripped = data.lstrip(b"\r\n")
            self.head_bytes += len(data) - len(stripped)
            if not stripped:
                return self._within_limits()
            data = stripped
            self.head_started = True
            if self.idle:  # a kept-alive connection's idle wait ends: the head is timed now
                self.idle = False
                self._arm(self.limits.head_timeout_s)
        window = self.tail + data
        end = _HEAD_END.search(window)
        taken = data if end is None else data[: max(end.end() - len(self.tail), 0)]
        self.head_bytes += len(taken)
        self.head_lines += taken.count(b"\n")
        if end is None:
            self.tail = window[-2:]
        else:
            self.head_done = True
        return self._within_limits()

    def _within_limits(self) -> bool:
        # header lines so far: the lines ended, less the request line (and the empty line)
        fields = self.head_lines - 1 - (1 if self.head_done else 0)
        if self.head_bytes <= self.limits.max_head_bytes and fields <= self.limits.max_headers:
            return True
        self.refuse(
            431,
            "Request Header Fields Too Large",
            "LimitExceeded",
            f"a request's head may have {self.limits.max_head_bytes} bytes and "
            f"{self.limits.max_headers} header fields",
        )
        return False

    # -- requests ----------------------------------------------------------------------
    def request_started(self) -> None:
        self.in_progress += 1
        self.draining = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def request_finished(self, unread: int | None = None) -> None:
        """The app returned; ``unread``: it answered before the request's body was read
        whole, and at most that many bytes of it may still come."""
        self.in_progress -= 1
        if self.in_progress == 0 and not self.closed:
            transport = self.transport
            if transport is None or transport.is_closing():
                return
            if unread is None:
                self.wait_for_head(first=False)
            else:
                # the rest of the body and the next head, within the body timeout
                self.draining = unread + self.limits.max_head_bytes
                self._arm(self.limits.body_timeout_s)

    # -- ending ------------------------------------------------------------------------
    def refuse(self, status: int, reason: str, type_: str, message: str) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(_raw_response(status, reason, type_, message))
        self.close()

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()


class GuardedProtocol(asyncio.Protocol):
    """uvicorn's protocol for one connection (``inner``, made with the arguments uvicorn
    gives), under ``guard``'s limits: see the module docstring. Made by
    :meth:`ConnectionGuard.protocol`, which sets both."""

    guard: ClassVar[ConnectionGuard]
    inner: ClassVar[type[asyncio.Protocol]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._inner = self.inner(*args, **kwargs)
        self._connection = _Connection(self.guard, asyncio.get_running_loop())
        self._key: str | None = None
        self._connected = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport (uvloop's are not asyncio.Transport subclasses, only alike)
        transport = cast(asyncio.Transport, transport)
        connection = self._connection
        connection.transport = transport
        peer = transport.get_extra_info("peername")
        host = str(peer[0]) if isinstance(peer, tuple | list) and peer else None
        key = address_key(host)
        if not self.guard.admit(key, host):
            connection.close()  # over the cap: closed before anything is read
            return
        self._key = key
        connection.wait_for_head(first=True)
        self._connected = True
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        connection = self._connection
        if not self._connected or connection.closed or not connection.read_head(data):
            return
        token = _connection.set(connection)
        try:
            self._inner.data_received(data)
        finally:
            _connection.reset(token)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._connected else None

    def connection_lost(self, exc: Exception | None) -> None:
        connection = self._connection
        if connection.timer is not None:
            connection.timer.cancel()
            connection.timer = None
        connection.closed = True
        if self._key is not None:
            self.guard.release(self._key)
            self._key = None
        if self._connected:
            self._connected = False
            self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._connected:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._connected:
            self._inner.resume_writing()


def _body_length(scope: Scope, cap: int) -> int | None:
    """The most bytes the request's body may have: its ``Content-Length``, ``cap`` when it is
    chunked; ``None`` when it has none."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            length = int(value) if value.strip().isdigit() else cap
            return length or None
        if name == b"transfer-encoding":
            return cap
    return None


class _GuardedApp:
    """The ASGI app uvicorn calls: marks each request in progress on its connection (see the
    module docstring) and reads its body under the body timeout."""

    def __init__(self, app: ASGIApp, limits: ConnectionLimits, body_cap: int) -> None:
        self.app = app
        self.limits = limits
        self.body_cap = body_cap

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        connection = _connection.get()
        if connection is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        connection.request_started()
        length = _body_length(scope, self.body_cap)
        if length is None:
            try:
                await self.app(scope, receive, send)
            finally:
                connection.request_finished()
            return
        body = _BodyReader(connection, receive, self.limits.body_timeout_s)
        try:
            await self.app(scope, body.receive, send)
        finally:
            connection.request_finished(None if body.complete else length)


class _BodyReader:
    """A request's ``receive`` with the body timeout: a body that stops coming for
    ``timeout_s`` ends the connection, and the app sees its client gone."""

    def __init__(self, connection: _Connection, receive: Receive, timeout_s: float) -> None:
        self._connection = connection
        self._receive = receive
        self._timeout_s = timeout_s
        self.complete = False

    async def receive(self) -> Message:
        if self.complete:
            return await self._receive()
        try:
            async with asyncio.timeout(self._timeout_s):
                message = await self._receive()
        except TimeoutError:
            self._connection.close()  # the body stopped coming: the client is gone for us
            return {"type": "http.disconnect"}
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.complete = True
        return message
