"""A real uvicorn serving :func:`~tavernkit.server.app.create_app` on a free loopback port,
in the test's own event loop, and clients for it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass

import httpx2 as httpx
import uvicorn
from fastapi import FastAPI

from tavernkit.server.app import create_app
from tavernkit.server.listen import listening_socket, uvicorn_config
from tavernkit.server.settings import ServerSettings
from tavernkit.server.state import ServerState

__all__ = ["LiveServer", "live_server", "threaded_server"]


@dataclass
class LiveServer:
    app: FastAPI
    url: str

    @property
    def state(self) -> ServerState:
        state = self.app.state.server
        assert isinstance(state, ServerState)
        return state

    def client(self, **kwargs: object) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=10.0, **kwargs)  # type: ignore[arg-type]


@asynccontextmanager
async def live_server(settings: ServerSettings) -> AsyncIterator[LiveServer]:
    """Serve ``settings`` (its host and port are ignored: 127.0.0.1 on a free port) until the
    block ends."""
    app = create_app(settings)
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    config = uvicorn_config(app, settings, lifespan="on", log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("uvicorn stopped before it started")
            await asyncio.sleep(0.01)
        yield LiveServer(app, f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        await task
        sock.close()


@contextmanager
def threaded_server(settings: ServerSettings) -> Iterator[str]:
    """Serve ``settings`` from a thread with its own event loop (for synchronous clients such
    as schemathesis' ``requests`` calls); the base URL. Stops when the block ends."""
    app = create_app(settings)
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn_config(app, settings, lifespan="on", log_level="warning"))
    # uvicorn leaves signals alone off the main thread
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])))
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
