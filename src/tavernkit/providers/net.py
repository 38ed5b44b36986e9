"""The network under a provider's own HTTP client: asyncio's protocols, without anyio.

httpx2's default network layer reads through anyio: each read of a streamed reply enters a
cancel scope, looks up the async library, and resumes then pauses the transport (two
``epoll_ctl`` calls). For a reply of a few hundred pieces that is most of what reading a piece
costs, and with hundreds of replies streaming at once it is the server's largest cost per piece
(benchmarks/server.py). :class:`AsyncioBackend` is an ``httpcore2`` network backend on
asyncio's own transports instead: the transport reads into the protocol's buffer as data comes,
and a read takes what is there or waits on one future (a timer only when a timeout is given).

The same errors as the anyio backend's: ``ConnectError``/``ConnectTimeout`` while connecting
(and during the TLS handshake), ``ReadError``/``ReadTimeout``, ``WriteError``/``WriteTimeout``,
so retries and error classes see no difference. Proxies keep httpx2's own transports (their
mounts are made apart from the client's transport); :func:`asyncio_transport` is the client's
direct one.

**Connections opened ahead.** :func:`open_ahead` starts the TCP connect to a request's origin
while the request is still being built, when the pool holds no idle connection to it; the
request's own connect then claims it (:meth:`AsyncioBackend.connect_tcp`) instead of opening
another. What it saves is the connect's round trip, up to the time the build takes (in a
turn's timeline on loopback the wait for the connect went from 0.6 to 0.03 ms; its first
token did not move there, as the upstream answers before the reply's place is stored). One
that is not claimed within :data:`AHEAD_S` is closed; one that failed or
that the peer closed meanwhile is opened again by the request, as if none had been.

Not to a loopback origin (a local llama.cpp, Ollama or vLLM, a test's upstream): there the
kernel completes the handshake inside ``connect()`` itself, so there is no round trip to
overlap, only the work of opening ahead and claiming. In the facade's timeline (the server's
benchmark, cold) opening ahead to loopback cost 0.45 ms more before the first token than
letting the request connect (:data:`AHEAD_TO_LOOPBACK` turns it on: the tests' peers are all
on loopback).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import ipaddress
import os
import socket
import ssl
from collections.abc import Coroutine, Iterable
from typing import Any, cast

import httpcore2
import httpx2
from httpcore2._backends.base import AsyncNetworkBackend, AsyncNetworkStream
from httpcore2._utils import is_socket_readable

__all__ = [
    "AHEAD_S",
    "AHEAD_TO_LOOPBACK",
    "AsyncioBackend",
    "AsyncioStream",
    "asyncio_transport",
    "close_ahead",
    "open_ahead",
]

SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)

#: how long a connection opened ahead of its request waits to be claimed before it is closed
AHEAD_S = 5.0

#: open ahead to a loopback origin too (see the module docstring: off, it only costs there)
AHEAD_TO_LOOPBACK = False

#: the transport stops reading past this many unread bytes, and goes on below the low mark
_HIGH = 1 << 20
_LOW = 1 << 18


class _Protocol(asyncio.Protocol):
    """What the transport received and not yet read, and who waits for it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.chunks: list[bytes] = []
        self.size = 0
        self.eof = False
        self.error: BaseException | None = None
        self.lost = False
        self.reading_paused = False
        self.waiter: asyncio.Future[None] | None = None
        self.writing_paused = False
        self.drained: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.size += len(data)
        if self.size > _HIGH and not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.error = self.error or exc
        self._wake()
        drained, self.drained = self.drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        drained, self.drained = self.drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def take(self, max_bytes: int) -> bytes:
        if len(self.chunks) == 1 and self.size <= max_bytes:
            data = self.chunks.pop()
        else:
            joined = b"".join(self.chunks)
            data, rest = joined[:max_bytes], joined[max_bytes:]
            self.chunks = [rest] if rest else []
        self.size -= len(data)
        if self.reading_paused and self.size < _LOW and self.transport is not None:
            self.reading_paused = False
            self.transport.resume_reading()
        return data


class AsyncioStream(AsyncNetworkStream):
    """One connection (see the module docstring)."""

    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        protocol = self._protocol
        if not protocol.chunks and not protocol.eof and not protocol.lost:
            protocol.waiter = asyncio.get_running_loop().create_future()
            try:
                if timeout is None:
                    await protocol.waiter
                else:
                    async with asyncio.timeout(timeout):
                        await protocol.waiter
            except TimeoutError:
                raise httpcore2.ReadTimeout(f"no data within {timeout} s") from None
            finally:
                protocol.waiter = None
        if protocol.chunks:
            return protocol.take(max_bytes)
        if protocol.error is not None:
            raise httpcore2.ReadError(str(protocol.error) or type(protocol.error).__name__)
        return b""  # the peer closed the connection

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        protocol = self._protocol
        if protocol.lost or self._transport.is_closing():
            raise httpcore2.WriteError("the connection is closed")
        try:
            self._transport.write(buffer)
        except (OSError, RuntimeError) as exc:
            raise httpcore2.WriteError(str(exc)) from None
        if protocol.writing_paused and not protocol.lost:
            protocol.drained = asyncio.get_running_loop().create_future()
            try:
                async with asyncio.timeout(timeout):
                    await protocol.drained
            except TimeoutError:
                raise httpcore2.WriteTimeout(f"could not write within {timeout} s") from None
        if protocol.lost and protocol.error is not None:
            raise httpcore2.WriteError(str(protocol.error))

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self._transport, self._protocol, ssl_context, server_hostname=server_hostname
                )
        except TimeoutError:
            self._transport.abort()
            raise httpcore2.ConnectTimeout("TLS handshake timed out") from None
        except (OSError, ssl.SSLError, ConnectionError) as exc:
            self._transport.abort()
            raise httpcore2.ConnectError(str(exc)) from None
        assert transport is not None
        tls = transport
        self._protocol.transport = tls  # reading is paused and resumed on the TLS one
        return AsyncioStream(tls, self._protocol)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        if info == "is_readable":
            # the transport reads eagerly: what it received (or an end) is in the protocol
            protocol = self._protocol
            if protocol.chunks or protocol.eof or protocol.lost:
                return True
            sock = self._transport.get_extra_info("socket")
            return is_socket_readable(sock) if isinstance(sock, socket.socket) else False
        return None


_Opened = tuple[asyncio.BaseTransport, _Protocol]


class AsyncioBackend(AsyncNetworkBackend):
    """Connections on asyncio's transports (see the module docstring)."""

    def __init__(self) -> None:
        #: (host, port) -> the connect opened ahead of its request, under way or done
        self._ahead: dict[tuple[str, int], asyncio.Task[_Opened]] = {}

    def open_ahead(self, host: str, port: int) -> None:
        """Start connecting to ``host:port`` for a request about to be sent (one at a time
        per origin: a second call while one waits does nothing)."""
        key = (host, port)
        if key in self._ahead:
            return
        loop = asyncio.get_running_loop()
        connect, sock = _connect_now(loop, host, port)
        task = loop.create_task(connect)
        if sock is not None:  # a task cancelled before it ran never reaches its own close
            task.add_done_callback(lambda done: _close_unowned(done, sock))
        self._ahead[key] = task
        loop.call_later(AHEAD_S, self._unclaimed, key, task)

    def _unclaimed(self, key: tuple[str, int], task: asyncio.Task[_Opened]) -> None:
        if self._ahead.get(key) is task:
            del self._ahead[key]
            _discard(task)

    def close_ahead(self) -> None:
        """Close every connection opened ahead and not claimed (the pool is closing)."""
        ahead, self._ahead = self._ahead, {}
        for task in ahead.values():
            _discard(task)

    async def _claim(self, host: str, port: int, timeout: float | None) -> _Opened | None:
        """The connection opened ahead to ``host:port``, once it is up; ``None`` when there is
        none, or it failed or was closed by the peer meanwhile (the caller opens one)."""
        task = self._ahead.pop((host, port), None)
        if task is None:
            return None
        if task.get_loop() is not asyncio.get_running_loop():
            _discard(task)
            return None
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await asyncio.shield(task)
        except TimeoutError:
            _discard(task)
            raise httpcore2.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
        except OSError:
            return None  # refused then: opened again now, the peer may be up since
        except BaseException:
            _discard(task)  # the request was cancelled while it waited
            raise
        if protocol.lost or protocol.eof:
            transport.close()
            return None
        return transport, protocol

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> AsyncNetworkStream:
        if local_address is None and self._ahead:
            opened = await self._claim(host, port, timeout)
            if opened is not None:
                return _with_options(opened[0], opened[1], socket_options)
        loop = asyncio.get_running_loop()
        local = (local_address, 0) if local_address else None
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_connection(
                    _Protocol, host, port, local_addr=local
                )
        except TimeoutError:
            raise httpcore2.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
        except OSError as exc:
            raise httpcore2.ConnectError(str(exc)) from None
        return _with_options(transport, protocol, socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_unix_connection(_Protocol, path)
        except TimeoutError:
            raise httpcore2.ConnectTimeout(f"connecting to {path} timed out") from None
        except OSError as exc:
            raise httpcore2.ConnectError(str(exc)) from None
        return _with_options(transport, protocol, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _connect_now(
    loop: asyncio.AbstractEventLoop, host: str, port: int
) -> tuple[Coroutine[Any, Any, _Opened], socket.socket | None]:
    """The connect to ``host:port``, its SYN sent before this returns when ``host`` is an
    address (a task's coroutine runs only when the loop gets to it, and the caller is about
    to build a request without yielding: the round trip happens meanwhile), with its socket;
    a name is resolved and connected by the loop, as any connect."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError):
        return loop.create_connection(_Protocol, host, port), None
    family, kind, proto, _, address = found[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        started = sock.connect_ex(address)
    except OSError:
        sock.close()
        return loop.create_connection(_Protocol, host, port), None
    return _connected(loop, sock, started), sock


def _close_unowned(task: asyncio.Task[_Opened], sock: socket.socket) -> None:
    """The socket of a connect that did not end in a transport (which owns it otherwise)."""
    if (task.cancelled() or task.exception() is not None) and sock.fileno() != -1:
        sock.close()


async def _connected(loop: asyncio.AbstractEventLoop, sock: socket.socket, started: int) -> _Opened:
    try:
        if started in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
            writable = loop.create_future()
            loop.add_writer(sock.fileno(), _settle, writable)
            try:
                await writable
            finally:
                loop.remove_writer(sock.fileno())
            started = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if started:
            raise OSError(started, os.strerror(started))
        return await loop.create_connection(_Protocol, sock=sock)
    except BaseException:
        sock.close()
        raise


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _discard(task: asyncio.Task[_Opened]) -> None:
    """Close what ``task`` opened, now or when it finishes; its error is seen, not logged."""

    def close(done: asyncio.Task[_Opened]) -> None:
        if done.cancelled():
            return
        if done.exception() is None:
            done.result()[0].close()

    if task.done():
        close(task)
    else:
        task.add_done_callback(close)
        task.cancel()


def _with_options(
    transport: asyncio.BaseTransport,
    protocol: _Protocol,
    options: Iterable[SocketOption] | None,
) -> AsyncioStream:
    sock = transport.get_extra_info("socket")
    for option in options or ():
        with contextlib.suppress(OSError):
            sock.setsockopt(*option)
    return AsyncioStream(cast(asyncio.Transport, transport), protocol)


def asyncio_transport(
    verify: ssl.SSLContext, *, limits: httpx2.Limits | None = None
) -> httpx2.AsyncHTTPTransport:
    """httpx2's transport with its connection pool on :class:`AsyncioBackend` (the pool is
    httpx2's own: keep-alive, limits and HTTP/1.1 parsing are unchanged). An httpx2 whose
    pool keeps its backend elsewhere gets its default one (tests/providers/test_net.py says
    which one the providers run on)."""
    transport = (
        httpx2.AsyncHTTPTransport(verify=verify)
        if limits is None
        else httpx2.AsyncHTTPTransport(verify=verify, limits=limits)
    )
    pool = getattr(transport, "_pool", None)
    if pool is not None and hasattr(pool, "_network_backend"):
        pool._network_backend = AsyncioBackend()
    return transport


@functools.lru_cache(maxsize=256)
def _loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: resolved by the connect, wherever it points


@functools.lru_cache(maxsize=256)
def _origin(url: str) -> tuple[bytes, str, int] | None:
    try:
        parsed = httpx2.URL(url)
    except (httpx2.InvalidURL, TypeError, UnicodeError):
        return None  # the request says what is wrong with it
    port = parsed.port or {"http": 80, "https": 443}.get(parsed.scheme)
    if port is None or not parsed.host:
        return None
    return parsed.raw_scheme, parsed.raw_host.decode("ascii"), port


def _backend(client: httpx2.AsyncClient, url: str | None = None) -> tuple[Any, Any]:
    # the mounts (proxies) are matched only when there are any: parsing the URL again costs
    if url is not None and client._mounts:
        transport = client._transport_for_url(httpx2.URL(url))
    else:
        transport = client._transport
    pool = getattr(transport, "_pool", None)
    return pool, getattr(pool, "_network_backend", None)


def close_ahead(client: httpx2.AsyncClient) -> None:
    """Close the connections opened ahead on ``client``'s pool and not claimed."""
    _, backend = _backend(client)
    if isinstance(backend, AsyncioBackend):
        backend.close_ahead()


def open_ahead(client: httpx2.AsyncClient, url: str) -> None:
    """Start the connection ``url``'s request will need, unless ``client``'s pool has an idle
    one to its origin (see the module docstring). A client whose transport for ``url`` is not
    :func:`asyncio_transport`'s (a proxy, a test's mock) is left alone."""
    origin = _origin(url)
    if origin is None:
        return
    pool, backend = _backend(client, url)
    if not isinstance(backend, AsyncioBackend) or not isinstance(
        pool, httpcore2.AsyncConnectionPool
    ):
        return
    scheme, host, port = origin
    if not AHEAD_TO_LOOPBACK and _loopback(host):
        return
    if (host, port) in backend._ahead:  # the build opened it: the send finds it under way
        return
    wanted = httpcore2.Origin(scheme, host.encode("ascii"), port)  # as the pool keys its own
    for connection in pool.connections:
        if (
            connection.can_handle_request(wanted)
            and connection.is_available()
            and not connection.has_expired()
        ):
            return
    backend.open_ahead(host, port)
