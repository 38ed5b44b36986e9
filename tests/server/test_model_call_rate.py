"""Every route that can make the server call a model (or an MCP server) counts against the
caller's ``turn_rate`` (issue 34, finding 5), at admission: before the route's own checks, so
a request that then fails counts too. With a rate of one call a minute, each route's first
call fails for its own reason (nothing here exists) and the second is a 429; another user's
calls are counted apart. ``/tasks``, the profile test and the MCP tool listing counted nothing
before; a group turn, a summary and the facade counted only requests that passed their checks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tavernkit.server.settings import RateLimit

from ._live import live_server
from .conftest import PASSWORD, Users, settings, token_client

ASK = [{"role": "user", "content": "hi"}]

#: each route that calls out: method, path, JSON body
MODEL_ROUTES: dict[str, tuple[str, str, Any]] = {
    "turn": ("POST", "/chats/nope/turns", {"kind": "send", "text": "hi"}),
    "group turn": ("POST", "/chats/nope/group-turns", {"kind": "send", "text": "hi"}),
    "task": ("POST", "/tasks", {"task_messages": ASK, "api_preset_name": "nope"}),
    "facade": ("POST", "/v1/chat/completions", {"model": "profile/nope", "messages": ASK}),
    "profile test": ("POST", "/ui/profiles/nope/test", None),
    "summary now": ("POST", "/chats/nope/summary/now", None),
    "mcp tools": ("GET", "/mcp/servers/nope/tools", None),
}


@pytest.fixture
async def one_call_a_minute(tmp_path: Path) -> AsyncIterator[Users]:
    conf = settings(tmp_path / "home", accounts=True, turn_rate=RateLimit(1, 60.0))
    async with live_server(conf) as server:
        for name in ("admin", "ann", "bob"):
            await server.state.accounts.create_user(name, PASSWORD, is_admin=name == "admin")
        clients = [await token_client(server, n) for n in ("admin", "ann", "bob")]
        try:
            yield Users(server, *clients)
        finally:
            for c in clients:
                await c.aclose()


@pytest.mark.parametrize("route", list(MODEL_ROUTES))
async def test_each_model_route_counts_at_admission(one_call_a_minute: Users, route: str) -> None:
    method, path, body = MODEL_ROUTES[route]
    users = one_call_a_minute
    first = await users.ann.request(method, path, json=body)
    assert first.status_code < 500 and first.status_code != 429, first.text  # failed, counted
    second = await users.ann.request(method, path, json=body)
    assert second.status_code == 429, second.text
    assert int(second.headers["retry-after"]) >= 1
    error = second.json()["error"]
    if route == "facade":  # OpenAI's shape, as every facade error
        assert error["type"] == "rate_limit_error" and error["code"] == "rate_limit_exceeded"
    else:
        assert error["type"] == "TooManyAttempts"
    # bob's calls are his own
    assert (await users.bob.request(method, path, json=body)).status_code != 429


async def test_the_routes_share_one_count(one_call_a_minute: Users) -> None:
    ann = one_call_a_minute.ann
    assert (await ann.post("/ui/profiles/nope/test")).status_code == 404
    refused = await ann.post("/tasks", json=MODEL_ROUTES["task"][2])
    assert refused.status_code == 429
