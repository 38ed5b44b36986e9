"""Servers for the route tests: one local (accounts off) and one with accounts (an admin and
two users, each with an API token), over a real uvicorn on loopback.

With accounts on, the users' requests go through the egress policy, which refuses loopback: a
test whose users reach a scripted upstream or MCP server on loopback (standing for a hosted
one) asks for ``users`` with :data:`LOOPBACK` (``indirect`` parametrization), which
allow-lists loopback as an admin would (``--allow-egress``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx
import pytest

from tavernkit.server.settings import RateLimit, ServerSettings

from ._live import LiveServer, live_server

PASSWORD = "correct horse battery"

#: the server settings that let users reach loopback (the tests' stand-ins for hosted APIs)
LOOPBACK: dict[str, object] = {"allow_egress": ("127.0.0.0/8", "::1/128")}
#: ``users`` whose requests may reach loopback: ``@with_loopback`` on a test or module
with_loopback = pytest.mark.parametrize(
    "users", [pytest.param(LOOPBACK, id="loopback-allowed")], indirect=True
)


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
async def users(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Users]:
    overrides: dict[str, object] = getattr(request, "param", {})
    conf = settings(tmp_path / "home", accounts=True, login_rate=RateLimit(5, 60.0), **overrides)
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
