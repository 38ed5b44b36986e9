"""A real server for the browser tests: uvicorn on create_app (loopback, a free port) and the
scripted upstream, run in a thread with its own event loop, so the sync Playwright API can
drive a browser from the test's thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from chat._server import HangingServer
from chat.conftest import stock_world
from server._live import LiveServer, live_server
from server.conftest import settings
from tavernkit.facade import Tavern

__all__ = ["Site"]

T = TypeVar("T")


class Site:
    """``with Site(home) as site``: a started server with Mira, a profile on the scripted
    upstream (``site.upstream.script(...)``) and Ada as the user; ``scripted=False``: a fresh
    home (no character, the default profile: the embedded model)."""

    def __init__(self, home: Path, *, scripted: bool = True, **overrides: object) -> None:
        self._scripted = scripted
        self._settings = settings(home, **overrides)
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.upstream: HangingServer
        self.server: LiveServer
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def tk(self) -> Tavern:
        return self.server.state.tavern

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported to the test's thread by __enter__
            self._failure = exc
            self._ready.set()

    async def _main(self) -> None:
        async with HangingServer() as upstream, live_server(self._settings) as server:
            if self._scripted:
                await stock_world(server.state.tavern, upstream.base_url)
            self.upstream, self.server = upstream, server
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self._ready.set()
            await self._stop.wait()

    def call(self, coro: Coroutine[Any, Any, T], *, timeout: float = 20) -> T:
        """Run ``coro`` on the server's loop (store reads and writes from the test)."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=timeout)

    def __enter__(self) -> Site:
        self._thread.start()
        self._ready.wait(timeout=30)
        if self._failure is not None:
            raise self._failure
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)
