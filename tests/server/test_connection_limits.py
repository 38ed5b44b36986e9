"""The connections themselves (``ServerSettings.connections``, server/connection_guard.py):
raw sockets on loopback against a real uvicorn. A silent connection, a head sent slowly, half a
body and an idle kept-alive connection are closed within their timeouts; an oversized head is a
431; the connection past the per-address cap is closed at once (from 127.0.0.2: 127.0.0.1 is a
trusted proxy address, not capped). Before the guard each of these was held open as long as
the client liked (the waits below then ran out)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from tavernkit.errors import ServerConfigError
from tavernkit.server.addresses import TrustedAddresses, address_key
from tavernkit.server.settings import ConnectionLimits, ServerSettings

from ._live import LiveServer, live_server
from .conftest import settings

#: short timeouts, so each test waits well under a second for what it checks
LIMITS = ConnectionLimits(
    head_timeout_s=0.5,
    body_timeout_s=1.0,
    keep_alive_s=0.3,
    max_head_bytes=4096,
    max_headers=20,
    per_address=3,
)
#: how long a test waits for a close before it fails: many times every timeout above
WAIT_S = 4.0
HEALTH = b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"

Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[LiveServer]:
    async with live_server(settings(tmp_path / "home", connections=LIMITS)) as served:
        yield served


Connect = Callable[..., Awaitable[Conn]]


@pytest.fixture
async def connect(server: LiveServer) -> AsyncIterator[Connect]:
    """Open a raw connection to the server from a loopback ``source`` address; every one is
    closed when the test ends (before the server stops: it waits for its requests)."""
    port = int(server.url.rsplit(":", 1)[1])
    opened: list[asyncio.StreamWriter] = []

    async def open_one(source: str = "127.0.0.1") -> Conn:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
        opened.append(writer)
        return reader, writer

    yield open_one
    for writer in opened:
        _close(writer)


async def _until_closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sent before it closed the connection; fails the test when the
    connection is still open after ``WAIT_S``."""
    data = b""
    try:
        async with asyncio.timeout(WAIT_S):
            while chunk := await reader.read(65536):
                data += chunk
    except ConnectionResetError:
        pass
    except TimeoutError:
        pytest.fail(f"the connection was still open after {WAIT_S} s (got {data[:80]!r})")
    return data


async def _response(reader: asyncio.StreamReader) -> tuple[bytes, dict[str, str], bytes]:
    """One response: its status line, headers (lower-case names) and body."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT_S)
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = await asyncio.wait_for(reader.readexactly(length), WAIT_S)
    return status.encode(), headers, body


def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        writer.close()


async def test_a_connection_that_sends_nothing_is_closed(connect: Connect) -> None:
    reader, writer = await connect()
    assert await _until_closed(reader) == b""  # nothing was asked: nothing is answered
    _close(writer)


async def test_a_head_sent_slowly_is_answered_408_and_closed(connect: Connect) -> None:
    reader, writer = await connect()

    async def drip() -> None:  # a header field every 0.1 s, forever: always some progress
        writer.write(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        with contextlib.suppress(OSError):
            for n in range(1000):
                writer.write(b"x-slow-%d: 1\r\n" % n)
                await writer.drain()
                await asyncio.sleep(0.1)

    dripping = asyncio.create_task(drip())
    try:
        sent = await _until_closed(reader)
    finally:
        dripping.cancel()
        _close(writer)
    assert sent.startswith(b"HTTP/1.1 408 ")
    body = json.loads(sent.partition(b"\r\n\r\n")[2])
    assert body["error"]["type"] == "RequestTimeout"


async def test_half_a_body_is_closed(connect: Connect) -> None:
    reader, writer = await connect()
    writer.write(
        b"PUT /variables/x HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b"content-length: 100\r\n\r\n" + b'{"value": '
    )
    await writer.drain()
    await _until_closed(reader)
    _close(writer)


async def test_a_slow_body_that_keeps_coming_is_served(connect: Connect) -> None:
    """The head timeout ends with the head: a body sent in pieces for longer than it (each
    piece well within the body timeout) is read whole and answered."""
    reader, writer = await connect()
    body = b'{"value": "' + b"a" * 50 + b'"}'
    writer.write(
        b"PUT /variables/slow HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n" % len(body)
    )
    for start in range(0, len(body), 10):  # 7 pieces, 0.2 s apart: 1.2 s > the 0.5 s head timeout
        writer.write(body[start : start + 10])
        await writer.drain()
        await asyncio.sleep(0.2)
    status, _, answer = await _response(reader)
    assert status.startswith(b"HTTP/1.1 200"), answer
    _close(writer)


async def test_an_idle_kept_alive_connection_is_closed(connect: Connect) -> None:
    reader, writer = await connect()
    writer.write(HEALTH)
    status, headers, _ = await _response(reader)
    assert status.startswith(b"HTTP/1.1 200") and headers.get("connection") != "close"
    assert await _until_closed(reader) == b""  # kept alive, then idle past keep_alive_s
    _close(writer)


async def test_a_second_request_sent_slowly_is_closed(connect: Connect) -> None:
    reader, writer = await connect()
    writer.write(HEALTH)
    await _response(reader)
    writer.write(b"GET /health HTTP/1.1\r\n")  # started within the keep-alive, never ended
    await writer.drain()
    assert (await _until_closed(reader)).startswith(b"HTTP/1.1 408 ")
    _close(writer)


@pytest.mark.parametrize(
    "extra",
    [
        b"x-big: " + b"a" * 5000 + b"\r\n",  # over max_head_bytes (4096)
        b"".join(b"x-%d: 1\r\n" % n for n in range(21)),  # 21 fields + host: over 20
    ],
    ids=["bytes", "fields"],
)
async def test_an_oversized_head_is_431(connect: Connect, extra: bytes) -> None:
    reader, writer = await connect()
    writer.write(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n" + extra + b"\r\n")
    await writer.drain()
    sent = await _until_closed(reader)
    _close(writer)
    assert sent.startswith(b"HTTP/1.1 431 ")
    assert json.loads(sent.partition(b"\r\n\r\n")[2])["error"]["type"] == "LimitExceeded"


async def test_a_head_at_the_limits_is_served(connect: Connect) -> None:
    reader, writer = await connect()
    fields = b"".join(b"x-%d: 1\r\n" % n for n in range(19))  # + host: 20
    writer.write(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n" + fields + b"\r\n")
    status, _, _ = await _response(reader)
    assert status.startswith(b"HTTP/1.1 200")
    _close(writer)


async def test_the_rest_of_a_body_answered_early_is_not_a_head(connect: Connect) -> None:
    """An answer sent before the body was read (a 404 here) leaves the connection usable: the
    rest of the body (longer than a head may be) is skipped, then the next request served."""
    reader, writer = await connect()
    writer.write(b"POST /no/such/route HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 9000\r\n\r\n")
    status, headers, _ = await _response(reader)
    assert status.startswith(b"HTTP/1.1 404") and headers.get("connection") != "close"
    writer.write(b"x" * 9000 + HEALTH)
    assert (await _response(reader))[0].startswith(b"HTTP/1.1 200")


async def test_bytes_past_an_early_answers_body_end_the_connection(connect: Connect) -> None:
    reader, writer = await connect()
    writer.write(b"POST /no/such/route HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 100\r\n\r\n")
    assert (await _response(reader))[0].startswith(b"HTTP/1.1 404")
    # the body's 100 bytes, then a "head" that never ends, past max_head_bytes (4096)
    writer.write(b"x" * 100 + b"GET /health HTTP/1.1\r\n" + b"x-big: " + b"a" * 5000)
    with contextlib.suppress(OSError):
        await writer.drain()
    assert await _until_closed(reader) == b""


async def test_the_connection_past_the_per_address_cap_is_closed(connect: Connect) -> None:
    held = [await connect("127.0.0.2") for _ in range(3)]
    for reader, writer in held:  # each served: the server has counted it
        writer.write(HEALTH)
        await _response(reader)
        writer.write(b"GET /health HTTP/1.1\r\n")  # holds it (until the head timeout)
    reader, writer = await connect("127.0.0.2")
    writer.write(HEALTH)
    assert await _until_closed(reader) == b""  # the fourth: closed, nothing read
    _close(writer)
    # another address is not affected, nor 127.0.0.1 (a trusted proxy's address)
    for source in ("127.0.0.3", "127.0.0.1", "127.0.0.1", "127.0.0.1"):
        reader, writer = await connect(source)
        writer.write(HEALTH)
        assert (await _response(reader))[0].startswith(b"HTTP/1.1 200")
        _close(writer)
    # a held connection closes: the address has room again
    for _, writer in held:
        _close(writer)
    for _ in range(50):
        await asyncio.sleep(0.02)
        reader, writer = await connect("127.0.0.2")
        writer.write(HEALTH)
        try:
            status = (await _response(reader))[0]
        except (asyncio.IncompleteReadError, ConnectionResetError):
            continue
        finally:
            _close(writer)
        assert status.startswith(b"HTTP/1.1 200")
        break
    else:
        pytest.fail("127.0.0.2 got no connection after its held ones closed")


async def test_httpx_clients_work_under_the_limits(server: LiveServer) -> None:
    async with server.client() as client:
        for _ in range(3):
            assert (await client.get("/health")).status_code == 200
        await asyncio.sleep(0.6)  # past keep-alive: the pool's connection was closed
        assert (await client.get("/health")).status_code == 200


@pytest.mark.parametrize(
    "limits",
    [
        ConnectionLimits(head_timeout_s=0),
        ConnectionLimits(keep_alive_s=-1),
        ConnectionLimits(max_head_bytes=100),
        ConnectionLimits(max_headers=0),
        ConnectionLimits(per_address=-1),
    ],
)
def test_bad_connection_limits_are_refused(limits: ConnectionLimits) -> None:
    with pytest.raises(ServerConfigError):
        ServerSettings(connections=limits).check()


def test_the_defaults() -> None:
    limits = ServerSettings().check().connections
    assert (limits.head_timeout_s, limits.keep_alive_s, limits.body_timeout_s) == (10, 5, 30)
    assert (limits.max_head_bytes, limits.max_headers, limits.per_address) == (32768, 100, 64)


def test_address_keys_and_trusted_addresses() -> None:
    # an IPv6 client is its /64 (one subscriber's block); a mapped IPv4 address is the IPv4
    assert address_key("2001:db8:1:2:3:4:5:6") == address_key("2001:db8:1:2:ffff::1")
    assert address_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:3::1") != address_key("2001:db8:1:2::1")
    assert address_key("::ffff:10.0.0.1") == address_key("10.0.0.1") == "10.0.0.1"
    assert address_key(None) == "unknown"
    trusted = TrustedAddresses("127.0.0.1, ::1, 10.0.0.0/8, unix:/run/proxy.sock")
    assert all(a in trusted for a in ("127.0.0.1", "::1", "10.1.2.3"))
    assert "127.0.0.2" not in trusted and "192.168.1.1" not in trusted
    assert "203.0.113.9" in TrustedAddresses(["*"])


def test_the_limits_hold_on_uvloop(tmp_path: Path) -> None:
    """``tavernkit serve`` runs on uvloop when installed (its transports are not asyncio's
    classes): a silent connection is closed, an oversized head is a 431, the connection past
    the cap is closed, and requests are served."""
    uvloop = pytest.importorskip("uvloop")

    async def scenario() -> None:
        async with live_server(settings(tmp_path / "home", connections=LIMITS)) as server:
            port = int(server.url.rsplit(":", 1)[1])
            opened: list[asyncio.StreamWriter] = []

            async def open_one(source: str) -> Conn:
                conn = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
                opened.append(conn[1])
                return conn

            try:
                reader, _ = await open_one("127.0.0.1")
                assert await _until_closed(reader) == b""
                reader, writer = await open_one("127.0.0.1")
                writer.write(b"GET /health HTTP/1.1\r\nx-big: " + b"a" * 5000 + b"\r\n\r\n")
                assert (await _until_closed(reader)).startswith(b"HTTP/1.1 431 ")
                for _ in range(3):
                    reader, writer = await open_one("127.0.0.2")
                    writer.write(HEALTH)
                    assert (await _response(reader))[0].startswith(b"HTTP/1.1 200")
                reader, writer = await open_one("127.0.0.2")
                writer.write(HEALTH)
                assert await _until_closed(reader) == b""
            finally:
                for writer in opened:
                    _close(writer)

    uvloop.run(scenario())
