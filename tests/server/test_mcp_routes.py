"""MCP registrations over a real uvicorn on loopback, against a real MCP server on loopback
(tests/tools/_mcp_server.py): registered with a write-only token, listed without it, its tools
listed through the token, switched off whole or tool by tool, replaced and deleted with its
key; stdio servers and server environment keys are an admin's only."""

from __future__ import annotations

import logging
import sys

import pytest

from tools._mcp_server import serve_http

from .conftest import Users, with_loopback

SECRET = "mcp-secret-0123456789"

pytestmark = with_loopback  # the test MCP server listens on loopback


async def _keys(users: Users, user: str) -> list[str]:
    """The ids of ``user``'s stored API keys."""
    found, _ = await users.server.state.accounts.store.find_user(user)
    tk = users.server.state.tavern.for_owner(found.owner)
    return [k.id for k in await tk.store.list_api_keys(owner=tk.owner)]


async def test_a_registration_keeps_its_token_write_only_and_lists_its_tools(
    users: Users, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ann = users.ann
    async with serve_http(token=SECRET) as (url, seen):
        r = await ann.post("/mcp/servers", json={"name": "web", "url": url, "token": SECRET})
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["transport"] == "http" and body["enabled"] and body["disabled_tools"] == []
        assert body["credential"].startswith("mcp:web (")
        listed = await ann.get("/mcp/servers")
        for answer in (r, listed, await ann.get("/mcp/servers/web")):
            assert SECRET not in answer.text
        assert [s["name"] for s in listed.json()] == ["web"]

        tools = await ann.get("/mcp/servers/web/tools")
        assert tools.status_code == 200, tools.text
        names = {t["name"] for t in tools.json()}
        assert {"web__add", "web__shout"} <= names
        assert f"Bearer {SECRET}" in seen.authorizations

        r = await ann.put("/mcp/servers/web/tools/shout/enabled", json={"enabled": False})
        assert r.status_code == 200 and r.json()["disabled_tools"] == ["shout"]
        names = {t["name"] for t in (await ann.get("/mcp/servers/web/tools")).json()}
        assert "web__shout" not in names and "web__add" in names
        r = await ann.put("/mcp/servers/web/tools/shout/enabled", json={"enabled": True})
        assert r.json()["disabled_tools"] == []

        r = await ann.put("/mcp/servers/web/enabled", json={"enabled": False})
        assert r.status_code == 200 and r.json()["enabled"] is False
        assert (await ann.get("/mcp/servers/web/tools")).json() == []

    again = await ann.post("/mcp/servers", json={"name": "web", "url": url, "token": "other"})
    assert again.status_code == 409 and again.json()["error"]["type"] == "Conflict"
    (first_key,) = await _keys(users, "ann")
    replaced = await ann.post(
        "/mcp/servers", json={"name": "web", "url": url, "token": "other-token", "replace": True}
    )
    assert replaced.status_code == 201, replaced.text
    (second_key,) = await _keys(users, "ann")  # the old token went with the old registration
    assert second_key != first_key
    assert (await ann.delete("/mcp/servers/web")).status_code == 204
    assert await _keys(users, "ann") == []
    assert (await ann.get("/mcp/servers/web")).status_code == 404
    assert (await ann.get("/mcp/servers")).json() == []
    assert SECRET not in caplog.text and "other-token" not in caplog.text


async def test_a_bad_registration_stores_nothing(users: Users) -> None:
    ann = users.ann
    for body, status in (
        ({"name": "web", "url": "ftp://example.org", "token": SECRET}, 422),
        ({"name": "web", "url": "http://127.0.0.1:9/mcp", "token": "t", "key_env": "X"}, 403),
        ({"name": "web", "url": "http://127.0.0.1:9/mcp", "secret": SECRET}, 422),
    ):
        r = await ann.post("/mcp/servers", json=body)
        assert r.status_code == status, (body, r.text)
        assert SECRET not in r.text
    assert (await ann.get("/mcp/servers")).json() == []
    assert await _keys(users, "ann") == []


async def test_stdio_servers_and_server_keys_are_an_admins(users: Users) -> None:
    stdio = {"name": "calc", "transport": "stdio", "command": sys.executable, "args": ["-V"]}
    refused = await users.ann.post("/mcp/servers", json=stdio)
    assert refused.status_code == 403 and refused.json()["error"]["type"] == "PermissionDenied"
    env = {"name": "web", "url": "http://127.0.0.1:9/mcp", "key_env": "HOME"}
    assert (await users.ann.post("/mcp/servers", json=env)).status_code == 403
    assert (await users.ann.get("/mcp/servers")).json() == []
    r = await users.admin.post("/mcp/servers", json=stdio)
    assert r.status_code == 201, r.text
    r = await users.admin.post("/mcp/servers", json=env)
    assert r.status_code == 201 and r.json()["credential"] == "$HOME"


async def test_an_unreachable_server_is_a_typed_error_without_its_token(users: Users) -> None:
    async with serve_http(token=SECRET) as (url, _seen):
        pass  # the port is closed again
    body = {"name": "gone", "url": url, "token": SECRET}
    assert (await users.ann.post("/mcp/servers", json=body)).status_code == 201
    r = await users.ann.get("/mcp/servers/gone/tools")
    # the registration is fine, its server is not: a gateway error, not the request's
    assert r.status_code == 502 and r.json()["error"]["type"] == "ToolSourceUnavailable"
    assert SECRET not in r.text and "gone" in r.json()["error"]["message"]
