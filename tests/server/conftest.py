"""Servers for the route tests: one local (accounts off) and one with accounts (an admin and
two users, each with an API token), over a real uvicorn on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx
import pytest

from tavernkit.server.settings import RateLimit, ServerSettings

from ._live import LiveServer, live_server

PASSWORD = "correct horse battery"


def settings(home: Path, **overrides: object) -> ServerSettings:
    base: dict[str, object] = {"home": home, "password_profile": "CHEAPEST"}
    base.update(overrides)
    return ServerSettings(**base)  # type: ignore[arg-type]


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[LiveServer]:
    async with live_server(settings(tmp_path / "home")) as server:
        yield server


@dataclass
class Users:
    server: LiveServer
    admin: httpx.AsyncClient
    ann: httpx.AsyncClient
    bob: httpx.AsyncClient


async def token_client(server: LiveServer, name: str) -> httpx.AsyncClient:
    accounts = server.state.accounts
    user, _ = await accounts.store.find_user(name)
    issued = await accounts.issue_token(user.id, "tests")
    return server.client(headers={"Authorization": f"Bearer {issued.token}"})


@pytest.fixture
async def users(tmp_path: Path) -> AsyncIterator[Users]:
    conf = settings(tmp_path / "home", accounts=True, login_rate=RateLimit(5, 60.0))
    async with live_server(conf) as server:
        accounts = server.state.accounts
        await accounts.create_user("admin", PASSWORD, is_admin=True)
        await accounts.create_user("ann", PASSWORD)
        await accounts.create_user("bob", PASSWORD)
        clients = [await token_client(server, n) for n in ("admin", "ann", "bob")]
        try:
            yield Users(server, *clients)
        finally:
            for c in clients:
                await c.aclose()
