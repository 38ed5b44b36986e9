"""A real uvicorn serving :func:`~tavernkit.server.app.create_app` on a free loopback port,
in the test's own event loop, and clients for it."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx2 as httpx
import uvicorn
from fastapi import FastAPI

from tavernkit.server.app import create_app
from tavernkit.server.settings import ServerSettings
from tavernkit.server.state import ServerState

__all__ = ["LiveServer", "live_server"]


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
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False)
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
