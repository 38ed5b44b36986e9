"""tavernkit's uvicorn protocol: a response's head leaves with its first body bytes, over a
real uvicorn on loopback read by a raw socket (what arrives in each read is what was written
together)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from tavernkit.server.http_protocol import HttpProtocol, is_response_head
from tavernkit.server.listen import listening_socket

App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]

#: every write a server's protocol made to its socket's transport, in order
WRITES: list[bytes] = []


class _Recorded:
    """A transport that notes each write it passes on (what leaves in one syscall)."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport

    def write(self, data: bytes) -> None:
        WRITES.append(bytes(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class RecordedHttpProtocol(HttpProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_Recorded(transport))  # type: ignore[arg-type]


class RecordedStockProtocol(HttpToolsProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_Recorded(transport))  # type: ignore[arg-type]


@asynccontextmanager
async def serving(app: App, protocol: type[asyncio.Protocol] = HttpProtocol) -> AsyncIterator[int]:
    WRITES.clear()
    sock = listening_socket("127.0.0.1", 0)
    config = uvicorn.Config(app, lifespan="off", log_level="critical", http=protocol)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            assert not task.done()
            await asyncio.sleep(0.01)
        yield int(sock.getsockname()[1])
    finally:
        server.should_exit = True
        await task
        sock.close()


async def read_some(reader: asyncio.StreamReader, timeout: float = 2.0) -> bytes:
    return await asyncio.wait_for(reader.read(65536), timeout)


REQUEST = b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"


@pytest.mark.parametrize("protocol", [RecordedHttpProtocol, RecordedStockProtocol])
async def test_the_head_leaves_with_the_first_body(protocol: type[asyncio.Protocol]) -> None:
    release = asyncio.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"data: first\n\n", "more_body": True})
        await release.wait()  # the stream stays open: nothing else is written meanwhile
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async with serving(app, protocol) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(REQUEST)
        first = await read_some(reader)
        release.set()
        rest = await read_some(reader)
        writer.close()
    assert first.startswith(b"HTTP/1.1 200 OK\r\n")
    assert first.endswith(b"\r\n\r\nd\r\ndata: first\n\n\r\n")
    assert rest == b"0\r\n\r\n"
    if protocol is RecordedHttpProtocol:  # one write, one packet: the head and the first piece
        assert [first, rest] == WRITES
    else:  # uvicorn's own: the head alone first, a packet (and a client wake-up) of its own
        assert len(WRITES) == 3 and WRITES[0].endswith(b"\r\n\r\n")


async def test_a_head_whose_body_comes_later_is_not_held_back() -> None:
    head_seen = asyncio.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await head_seen.wait()  # the body only once the client has the head
        await send({"type": "http.response.body", "body": b"late", "more_body": False})

    async with serving(app) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(REQUEST)
        head = await read_some(reader)  # would time out if the head waited for the body
        head_seen.set()
        body = await read_some(reader)
        writer.close()
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and head.endswith(b"\r\n\r\n")
    assert body == b"4\r\nlate\r\n0\r\n\r\n"


async def test_100_continue_is_sent_at_once() -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        message = await receive()
        body = message.get("body", b"")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async with serving(app) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\nexpect: 100-continue\r\n\r\n"
        )
        interim = await read_some(reader)  # the client sends its body only after this
        writer.write(b"hello")
        final = await read_some(reader)
        writer.close()
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert final.startswith(b"HTTP/1.1 200 OK\r\n")
    assert final.endswith(b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n")


async def test_a_held_head_goes_out_before_the_connection_closes() -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        raise RuntimeError("the app fails after its head")  # uvicorn closes the connection

    async with serving(app) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(REQUEST)
        got = await asyncio.wait_for(reader.read(), 2.0)  # to EOF
        writer.close()
    assert got.startswith(b"HTTP/1.1 200 OK\r\n") and got.endswith(b"\r\n\r\n")


async def test_keep_alive_responses_each_leave_whole() -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = scope["path"].encode()
        headers = [(b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async with serving(app) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        got = []
        for path in (b"/one", b"/two"):
            writer.write(b"GET %s HTTP/1.1\r\nhost: x\r\n\r\n" % path)
            got.append(await read_some(reader))
        writer.close()
    for path, response in zip((b"/one", b"/two"), got, strict=True):
        assert response.startswith(b"HTTP/1.1 200 OK\r\n")
        assert response.endswith(b"\r\n\r\n" + path)


@pytest.mark.parametrize(
    ("data", "held"),
    [
        (b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\n", True),
        (b"HTTP/1.0 404 Not Found\r\n\r\n", True),
        (b"HTTP/1.1 100 Continue\r\n\r\n", False),  # the client waits for it
        (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", False),
        (b"HTTP/1.1 200 OK\r\ncontent-type: text/pl", False),  # not a whole head
        (b"5\r\nhello\r\n", False),
        (b"", False),
    ],
)
def test_is_response_head(data: bytes, held: bool) -> None:
    assert is_response_head(data) is held
    assert is_response_head(memoryview(data)) is held
