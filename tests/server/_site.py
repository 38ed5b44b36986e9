"""A live server with the demo world on a scripted upstream, and a client for it (what the
turn and task route tests share)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from chat._server import HangingServer
from chat.conftest import stock_world
from tavernkit.facade import Tavern

from ._live import LiveServer, live_server
from ._sse import events_of
from .conftest import settings

__all__ = ["Site", "site"]


@dataclass
class Site:
    server: LiveServer
    upstream: HangingServer
    client: httpx.AsyncClient
    tk: Tavern

    async def new_chat(self) -> str:
        return (await self.tk.chats.new_chat("Mira")).id

    async def start(self, chat: str, **body: Any) -> httpx.Response:
        return await self.client.post(f"/chats/{chat}/turns", json={"text": "Hello", **body})

    async def stored_reply(self, chat: str) -> str:
        stored = await self.tk.chats.load(chat)
        return str(stored.messages[-1].data["mes"])

    async def watch_until_text(self, url: str) -> None:
        """Read a turn's events until its first text, then drop the connection (a phone
        that backgrounds the tab)."""
        async with self.client.stream("GET", url) as response:
            async for event in events_of(response):
                if event.type == "text":
                    return


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[Site]:
    async with HangingServer() as upstream, live_server(settings(tmp_path / "home")) as server:
        tk = server.state.tavern
        await stock_world(tk, upstream.base_url)
        async with server.client() as client:
            yield Site(server, upstream, client, tk)
