"""The routes' dependencies: each a coroutine (FastAPI runs a plain function dependency in a
worker thread, a thread hop per request), and the principal found once per request however
many dependencies need it."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from tavernkit.server.routes import ROUTERS

from .conftest import Users


def _calls(dependant: Dependant) -> list[Any]:
    out = []
    for sub in dependant.dependencies:
        out.append(sub.call)
        out.extend(_calls(sub))
    return out


def test_every_dependency_of_every_route_is_a_coroutine() -> None:
    plain = set()
    routes = [r for router in ROUTERS for r in router.routes if isinstance(r, APIRoute)]
    assert len(routes) > 100
    for route in routes:
        for call in _calls(route.dependant):
            wrapped = inspect.unwrap(call)
            if not (inspect.iscoroutinefunction(wrapped) or inspect.isasyncgenfunction(wrapped)):
                plain.add(getattr(wrapped, "__name__", repr(wrapped)))
    assert not plain, f"plain function dependencies (each a worker-thread hop): {sorted(plain)}"


async def test_a_token_is_looked_up_once_per_request(
    users: Users, monkeypatch: pytest.MonkeyPatch
) -> None:
    accounts = users.server.state.accounts
    look_up = accounts.principal_for_token
    seen: list[str] = []

    async def counted(token: str) -> Any:
        seen.append(token)
        return await look_up(token)

    monkeypatch.setattr(accounts, "principal_for_token", counted)
    # a route whose dependencies need the principal twice over (the principal, the Tavern)
    started = await users.ann.post("/chats/nope/turns", json={"text": "hi"})
    assert started.status_code == 404
    assert len(seen) == 1
    seen.clear()
    me = await users.ann.get("/auth/me")
    assert me.status_code == 200 and me.json()["name"] == "ann"
    assert len(seen) == 1
    # and a request of another user is that user's
    assert (await users.bob.get("/auth/me")).json()["name"] == "bob"
