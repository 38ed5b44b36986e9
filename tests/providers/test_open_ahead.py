"""Connections opened ahead of their request (providers/net.py ``open_ahead``), over real
loopback sockets: the request claims the one opened for it, an idle pooled connection opens
nothing, one left unclaimed or closed by the pool closes, one the peer dropped or refused is
tried again as a plain connect would be."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import warnings
from collections.abc import AsyncIterator

import pytest

from tavernkit.errors import NetworkError
from tavernkit.providers import net
from tavernkit.providers.events import TextDelta
from tavernkit.providers.net import open_ahead
from tavernkit.providers.openai_chat import OpenAIChatAdapter
from tavernkit.providers.pool import HttpPool
from tavernkit.providers.provider import Provider
from tavernkit.providers.request import ChatMessage, ChatPrompt

PROMPT = ChatPrompt((ChatMessage("user", "hi"),))


class Upstream:
    """An OpenAI-compatible endpoint that counts connections, the requests on them and the
    connections that ended; ``keep_alive`` keeps a connection for the next request."""

    def __init__(self, *, keep_alive: bool) -> None:
        self.keep_alive = keep_alive
        self.connections = 0
        self.requests = 0
        self.ended = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                await reader.readexactly(length)
                self.requests += 1
                frame = {"choices": [{"index": 0, "delta": {"content": f"R{self.requests}"}}]}
                body = f"data: {json.dumps(frame)}\n\ndata: [DONE]\n\n".encode()
                close = b"" if self.keep_alive else b"connection: close\r\n"
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    + close
                    + f"content-length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
                if not self.keep_alive:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.ended += 1
            writer.close()


@contextlib.asynccontextmanager
async def serving(upstream: Upstream) -> AsyncIterator[str]:
    server = await asyncio.start_server(upstream.handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    finally:
        for writer in upstream.writers:
            writer.transport.abort()
        server.close()


async def until(check: object, what: str) -> None:
    for _ in range(200):
        if callable(check) and check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never: {what}")


async def text_of(provider: Provider) -> str:
    return "".join([e.text async for e in provider.stream(PROMPT) if isinstance(e, TextDelta)])


@pytest.fixture(autouse=True)
def _ahead_to_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every peer here is on loopback, where opening ahead is off by default."""
    monkeypatch.setattr(net, "AHEAD_TO_LOOPBACK", True)


def provider(pool: HttpPool, base_url: str) -> Provider:
    return Provider(
        name="loop", base_url=base_url, adapter=OpenAIChatAdapter(), model="m", client=pool.client()
    )


@contextlib.asynccontextmanager
async def opened_ahead(host: str = "127.0.0.1") -> AsyncIterator[tuple[Upstream, Provider]]:
    """A provider on a fresh pool to an upstream that closes each connection, with its
    connection opened ahead and accepted."""
    upstream, pool = Upstream(keep_alive=False), HttpPool()
    async with serving(upstream) as url:
        p = provider(pool, url.replace("127.0.0.1", host))
        try:
            p.open_ahead()
            await until(lambda: upstream.connections == 1, "the connection opened ahead")
            yield upstream, p
        finally:
            await pool.aclose()


async def test_the_request_goes_out_on_the_connection_opened_for_it() -> None:
    async with opened_ahead() as (upstream, p):
        assert await text_of(p) == "R1"
        assert upstream.connections == upstream.requests == 1
        assert await text_of(p) == "R2"  # the server closed the first: opened ahead again
        assert upstream.connections == upstream.requests == 2


async def test_an_idle_pooled_connection_opens_nothing_ahead() -> None:
    upstream, pool = Upstream(keep_alive=True), HttpPool()
    async with serving(upstream) as url:
        p = provider(pool, url)
        try:
            assert await text_of(p) == "R1"
            p.open_ahead()
            await asyncio.sleep(0.05)
            assert upstream.connections == 1
            assert await text_of(p) == "R2"
            assert upstream.connections == 1 and upstream.requests == 2
        finally:
            await pool.aclose()


async def test_a_connection_left_unclaimed_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(net, "AHEAD_S", 0.05)
    upstream, pool = Upstream(keep_alive=False), HttpPool()
    async with serving(upstream) as url:
        try:
            open_ahead(pool.client(), url)  # type: ignore[arg-type]
            await until(lambda: upstream.ended == 1, "the unclaimed connection closed")
            assert upstream.requests == 0
        finally:
            await pool.aclose()


async def test_closing_the_pool_closes_what_it_opened_ahead() -> None:
    upstream, pool = Upstream(keep_alive=False), HttpPool()
    async with serving(upstream) as url:
        open_ahead(pool.client(), url)  # type: ignore[arg-type]
        await until(lambda: upstream.connections == 1, "the connection opened ahead")
        await pool.aclose()
        await until(lambda: upstream.ended == 1, "the connection closed with the pool")


async def test_a_pool_closed_before_the_connect_ran_leaves_no_socket_open() -> None:
    """The socket is made (and its SYN sent) before the connect's task first runs: a task
    cancelled then never reaches its own close, so the socket is closed apart."""
    upstream, pool = Upstream(keep_alive=False), HttpPool()
    async with serving(upstream) as url:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always", ResourceWarning)
            open_ahead(pool.client(), url)  # type: ignore[arg-type]
            await pool.aclose()  # the task was cancelled before the loop ran it
            await asyncio.sleep(0.01)
            gc.collect()
        assert not [w for w in seen if issubclass(w.category, ResourceWarning)]


async def test_a_connection_the_peer_dropped_meanwhile_is_opened_again() -> None:
    async with opened_ahead() as (upstream, p):
        upstream.writers[0].transport.abort()  # e.g. the server's idle timeout
        await until(lambda: upstream.ended == 1, "the drop")
        await asyncio.sleep(0.01)  # the client side sees the reset
        assert await text_of(p) == "R1"
        assert upstream.connections == 2


async def test_a_refused_connect_ahead_fails_the_request_as_a_plain_one_would() -> None:
    upstream, pool = Upstream(keep_alive=False), HttpPool()
    async with serving(upstream) as url:
        pass  # a port that was just free
    p = provider(pool, url)
    try:
        p.open_ahead()
        await asyncio.sleep(0.02)
        with pytest.raises(NetworkError):
            await text_of(p)
    finally:
        await pool.aclose()


async def test_a_name_is_resolved_and_connected_ahead_too() -> None:
    async with opened_ahead(host="localhost") as (upstream, p):
        assert await text_of(p) == "R1"
        assert upstream.connections == 1


def test_a_url_that_cannot_be_parsed_opens_nothing() -> None:
    async def run() -> None:
        pool = HttpPool()
        client = pool.client()
        assert client is not None
        open_ahead(client, "not a url at all")
        open_ahead(client, "ftp://example.invalid/")
        backend = client._transport._pool._network_backend  # type: ignore[attr-defined]
        assert backend._ahead == {}
        await pool.aclose()

    asyncio.run(run())


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_nothing_is_opened_ahead_to_a_loopback_origin_by_default(
    host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On loopback the connect has no round trip to hide: the request connects itself."""
    monkeypatch.setattr(net, "AHEAD_TO_LOOPBACK", False)
    upstream, pool = Upstream(keep_alive=False), HttpPool()
    async with serving(upstream) as url:
        p = provider(pool, url.replace("127.0.0.1", host))
        try:
            p.open_ahead()
            backend = p.client._transport._pool._network_backend  # type: ignore[union-attr]
            assert backend._ahead == {}
            await asyncio.sleep(0.02)
            assert upstream.connections == 0
            assert await text_of(p) == "R1"
            assert upstream.connections == upstream.requests == 1
        finally:
            await pool.aclose()


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("api.localhost", True),
        ("10.0.0.7", False),
        ("192.168.1.20", False),
        ("api.openai.com", False),
        ("localhost.example.com", False),
    ],
)
def test_which_origins_are_loopback(host: str, loopback: bool) -> None:
    assert net._loopback(host) is loopback
