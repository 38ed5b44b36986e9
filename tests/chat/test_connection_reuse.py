"""A Tavern's turns share one connection pool (``Runtime.http``): a turn that follows another
reuses its connection to the API, where each used to open (and, over TLS, handshake) its own;
the Tavern's close closes it. Against a real keep-alive HTTP/1.1 server on loopback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tavernkit.chat.service import ChatService
from tavernkit.facade import Tavern

from .conftest import stock_world


class KeepAliveServer:
    """An OpenAI-compatible streaming endpoint that keeps each connection open for the next
    request (chunked replies, no ``connection: close``), and counts the connections."""

    def __init__(self, *, close_each: bool = False) -> None:
        #: close each connection after its reply (``connection: close``), as some servers do
        self.close_each = close_each
        self.connections = 0
        self.requests = 0
        self.closed = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> KeepAliveServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                length = next(
                    int(line.split(":", 1)[1])
                    for line in lines
                    if line.lower().startswith("content-length:")
                )
                await reader.readexactly(length)
                self.requests += 1
                frames = [
                    {"choices": [{"index": 0, "delta": {"content": f"Reply {self.requests}."}}]},
                    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                ]
                body = "".join(f"data: {json.dumps(f)}\n\n" for f in frames) + "data: [DONE]\n\n"
                data = body.encode()
                close = b"connection: close\r\n" if self.close_each else b""
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    + close
                    + b"transfer-encoding: chunked\r\n\r\n"
                    + f"{len(data):x}\r\n".encode()
                    + data
                    + b"\r\n0\r\n\r\n"
                )
                await writer.drain()
                if self.close_each:
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed += 1
        finally:
            writer.close()


async def test_turns_reuse_one_connection_and_close_closes_it(tmp_path: Path) -> None:
    async with KeepAliveServer() as server:
        tk = await Tavern(tmp_path / "home", load_plugins=False).open()
        try:
            await stock_world(tk, server.base_url)
            chat = await tk.chats.new_chat("Mira")
            first = await tk.chats.send(chat.id, "Hello")
            second = await tk.chats.send(chat.id, "And again")
            other = ChatService(tk.runtime)  # another service of the same Tavern: same pool
            third = await other.send(chat.id, "Once more")
            assert [first.text, second.text, third.text] == ["Reply 1.", "Reply 2.", "Reply 3."]
            assert server.requests == 3
            assert server.connections == 1  # one per turn before the pool
        finally:
            await tk.close()
        for _ in range(100):  # the server sees the close
            if server.closed:
                break
            await asyncio.sleep(0.01)
        assert server.closed == 1


async def test_a_server_that_closes_each_connection_sees_one_per_turn(tmp_path: Path) -> None:
    """With no idle connection to reuse, a turn opens one connection and sends on it: none
    opened and left unused."""
    async with KeepAliveServer(close_each=True) as server:
        tk = await Tavern(tmp_path / "home", load_plugins=False).open()
        try:
            await stock_world(tk, server.base_url)
            chat = await tk.chats.new_chat("Mira")
            texts = [(await tk.chats.send(chat.id, f"Turn {n}")).text for n in range(3)]
            assert texts == ["Reply 1.", "Reply 2.", "Reply 3."]
            await asyncio.sleep(0.05)  # a connection opened after the last reply would show
            assert server.connections == server.requests == 3
        finally:
            await tk.close()


async def test_a_tavern_used_from_a_second_loop_opens_a_new_connection(tmp_path: Path) -> None:
    """A pool's connections belong to the loop that opened them: a closed loop's are not
    reused by the next (they would fail on their first write)."""
    async with KeepAliveServer() as server:
        tk = await Tavern(tmp_path / "home", load_plugins=False).open()
        try:
            await stock_world(tk, server.base_url)
            chat = await tk.chats.new_chat("Mira")
            assert (await tk.chats.send(chat.id, "Hello")).text == "Reply 1."
            loop = asyncio.get_running_loop()
            first_client = tk.runtime.http.client()

            def elsewhere() -> object:
                other = asyncio.new_event_loop()
                try:
                    return other.run_until_complete(_client_of(tk))
                finally:
                    other.close()

            other_client = await loop.run_in_executor(None, elsewhere)
            assert other_client is not first_client
            assert tk.runtime.http.client() is first_client  # this loop's is kept
        finally:
            await tk.close()


async def _client_of(tk: Tavern) -> object:
    return tk.runtime.http.client()
