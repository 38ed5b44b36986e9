"""The providers' HTTP client (httpx2's own transport and connection pool), over real loopback
sockets: plain and TLS streams, a dropped connection, refused and silent peers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx2
import pytest

from generation._scripted_server import Reply, ScriptedServer
from tavernkit.errors import NetworkError, ProviderTimeout, StreamInterrupted
from tavernkit.providers.events import Finish, ProviderErrorEvent, StreamEvent, TextDelta
from tavernkit.providers.http import Timeouts
from tavernkit.providers.openai_chat import OpenAIChatAdapter
from tavernkit.providers.provider import Provider
from tavernkit.providers.request import ChatMessage, ChatPrompt

PROMPT = ChatPrompt((ChatMessage("user", "hi"),))

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _provider(base_url: str) -> Provider:
    return Provider(name="loop", base_url=base_url, adapter=OpenAIChatAdapter(), model="m")


async def _events(p: Provider) -> list[StreamEvent]:
    return [event async for event in p.stream(PROMPT)]


def _text(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def _frame(text: str) -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"content": text}}]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


@contextlib.asynccontextmanager
async def _serve(handler: Handler, ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        with contextlib.suppress(Exception):
            await handler(reader, writer)

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ssl_context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        for writer in writers:
            writer.transport.abort()
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2)


async def _request(reader: asyncio.StreamReader) -> None:
    length = 0
    while (line := await reader.readline()).strip():
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    await reader.readexactly(length)


async def test_a_streamed_reply_over_loopback_arrives_whole() -> None:
    text = " ".join(f"w{n}" for n in range(50))
    async with ScriptedServer([Reply(text=text, pace=0.001)]) as upstream:
        events = await _events(_provider(f"{upstream.base_url}/v1"))
    assert _text(events) == text
    assert any(isinstance(e, Finish) and e.reason == "stop" for e in events)


async def test_a_big_body_is_read_past_the_buffer_marks() -> None:
    """Megabytes in one burst, more than any one read takes."""
    piece = "x" * 4096

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        writer.write(b"".join(_frame(piece) for _ in range(600)))  # ~2.5 MB at once
        writer.write(b"data: [DONE]\n\n")
        await writer.drain()
        writer.close()

    async with _serve(handler) as port:
        events = await _events(_provider(f"http://127.0.0.1:{port}/v1"))
    assert _text(events) == piece * 600


async def test_a_connection_dropped_mid_reply_keeps_the_text() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
        writer.write(b"transfer-encoding: chunked\r\n\r\n")
        body = _frame("Hello")
        writer.write(f"{len(body):x}\r\n".encode() + body + b"\r\n")
        await writer.drain()
        writer.transport.abort()  # no terminator, no last chunk

    async with _serve(handler) as port:
        events = await _events(_provider(f"http://127.0.0.1:{port}/v1"))
    assert _text(events) == "Hello"
    last = events[-1]
    assert isinstance(last, ProviderErrorEvent) and isinstance(last.error, StreamInterrupted)


async def test_a_refused_connection_is_a_network_error() -> None:
    async with _serve(_request) as port:  # a port that was just free
        pass
    with pytest.raises(NetworkError):
        await _events(_provider(f"http://127.0.0.1:{port}/v1"))


async def test_a_silent_peer_times_the_read_out() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(10)

    async with _serve(handler) as port:
        provider = _provider(f"http://127.0.0.1:{port}/v1")
        provider.timeouts = Timeouts(first_byte=0.05)
        with pytest.raises(ProviderTimeout):
            await _events(provider)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:  # pragma: no cover
        pytest.skip("needs the openssl command to make a certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_a_tls_stream_is_verified_and_read(certificate: tuple[Path, Path]) -> None:
    await _tls_round(certificate)


def test_the_client_runs_on_uvloop(certificate: tuple[Path, Path]) -> None:
    """uvloop (what ``tavernkit serve`` runs on when installed) has its own transports."""
    uvloop = pytest.importorskip("uvloop")

    async def rounds() -> None:
        await test_a_streamed_reply_over_loopback_arrives_whole()
        await test_a_connection_dropped_mid_reply_keeps_the_text()
        await _tls_round(certificate)

    uvloop.run(rounds())


async def _tls_round(certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        for word in ("over ", "TLS"):
            writer.write(_frame(word))
            await writer.drain()
        writer.write(b"data: [DONE]\n\n")
        await writer.drain()
        writer.close()

    trusted = ssl.create_default_context(cafile=str(cert))
    async with _serve(handler, served) as port:
        client = httpx2.AsyncClient(verify=trusted)
        try:
            provider = _provider(f"https://127.0.0.1:{port}/v1")
            provider.client = client
            events = await _events(provider)
        finally:
            await client.aclose()
        assert _text(events) == "over TLS"
        # the same server with a client that does not trust its certificate: refused
        strict = httpx2.AsyncClient(verify=ssl.create_default_context())
        try:
            provider = _provider(f"https://127.0.0.1:{port}/v1")
            provider.client = strict
            with pytest.raises(NetworkError):
                await _events(provider)
        finally:
            await strict.aclose()
