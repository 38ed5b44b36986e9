"""Password changes over a real uvicorn with accounts: a user changes their own (the old one
required), an admin resets anyone's; either way whoever held the old password is signed out
(every other session, every other API token), and a refused change changes nothing."""

from __future__ import annotations

from contextlib import AsyncExitStack

import httpx2 as httpx

from ._live import LiveServer
from .conftest import PASSWORD, Users

NEW = "a new passphrase 42"


async def _session(
    server: LiveServer, stack: AsyncExitStack, name: str, password: str
) -> httpx.AsyncClient:
    """A signed-in cookie client that sends its CSRF token."""
    client = await stack.enter_async_context(server.client())
    r = await client.post("/auth/login", json={"name": name, "password": password})
    assert r.status_code == 200, r.text
    client.headers["X-CSRF-Token"] = r.json()["csrf_token"]
    return client


async def _login(server: LiveServer, name: str, password: str) -> int:
    async with server.client() as c:
        return (await c.post("/auth/login", json={"name": name, "password": password})).status_code


async def test_a_wrong_old_password_or_a_short_new_one_changes_nothing(users: Users) -> None:
    async with AsyncExitStack() as stack:
        mine = await _session(users.server, stack, "ann", PASSWORD)
        other = await _session(users.server, stack, "ann", PASSWORD)
        r = await mine.post(
            "/auth/password", json={"old_password": "wrong one!", "new_password": NEW}
        )
        assert r.status_code == 403 and r.json()["error"]["type"] == "PermissionDenied"
        r = await mine.post(
            "/auth/password", json={"old_password": PASSWORD, "new_password": "short"}
        )
        assert r.status_code == 422
        assert r.json()["error"]["field"] == "new_password"
        assert "10 characters" in r.json()["error"]["message"]
        r = await mine.post("/auth/password", json={"new_password": NEW})
        assert r.status_code == 422 and r.json()["error"]["field"] == "body.old_password"
        # nothing changed: the old password signs in, the sessions and tokens still work
        for client in (mine, other, users.ann):
            assert (await client.get("/auth/me")).status_code == 200
        assert await _login(users.server, "ann", PASSWORD) == 200
        assert await _login(users.server, "ann", NEW) == 401


async def test_a_change_ends_the_other_sessions_and_the_tokens(users: Users) -> None:
    async with AsyncExitStack() as stack:
        mine = await _session(users.server, stack, "ann", PASSWORD)
        other = await _session(users.server, stack, "ann", PASSWORD)
        bob = await _session(users.server, stack, "bob", PASSWORD)
        extra = (await mine.post("/auth/tokens", json={"label": "bot"})).json()["token"]
        body = {"old_password": PASSWORD, "new_password": NEW}
        assert (await mine.post("/auth/password", json=body)).status_code == 204
        assert (await mine.get("/auth/me")).json()["name"] == "ann"  # this session stays
        assert (await mine.get("/auth/tokens")).json() == []
        for gone in (other, users.ann):
            r = await gone.get("/auth/me")
            assert r.status_code == 401 and r.json()["error"]["type"] == "NotAuthenticated"
        async with users.server.client(headers={"Authorization": f"Bearer {extra}"}) as c:
            assert (await c.get("/auth/me")).status_code == 401
        # another user is untouched
        assert (await bob.get("/auth/me")).status_code == 200
        assert (await users.bob.get("/auth/me")).status_code == 200
        assert await _login(users.server, "ann", PASSWORD) == 401
        assert await _login(users.server, "ann", NEW) == 200


async def test_a_token_caller_keeps_its_own_token(users: Users) -> None:
    async with AsyncExitStack() as stack:
        session = await _session(users.server, stack, "ann", PASSWORD)
        other = (await users.ann.post("/auth/tokens", json={"label": "other"})).json()["token"]
        body = {"old_password": PASSWORD, "new_password": NEW}
        assert (await users.ann.post("/auth/password", json=body)).status_code == 204
        assert [t["label"] for t in (await users.ann.get("/auth/tokens")).json()] == ["tests"]
        assert (await session.get("/auth/me")).status_code == 401
        async with users.server.client(headers={"Authorization": f"Bearer {other}"}) as c:
            assert (await c.get("/auth/me")).status_code == 401


async def test_an_admin_resets_a_password_and_signs_the_user_out(users: Users) -> None:
    async with AsyncExitStack() as stack:
        ann = await _session(users.server, stack, "ann", PASSWORD)
        ann_id = (await ann.get("/auth/me")).json()["user_id"]
        refused = await users.bob.post(f"/users/{ann_id}/password", json={"password": NEW})
        assert refused.status_code == 403
        r = await users.admin.post(f"/users/{ann_id}/password", json={"password": "short"})
        assert r.status_code == 422 and r.json()["error"]["field"] == "password"
        assert (await ann.get("/auth/me")).status_code == 200
        missing = await users.admin.post("/users/nobody/password", json={"password": NEW})
        assert missing.status_code == 404
        r = await users.admin.post(f"/users/{ann_id}/password", json={"password": NEW})
        assert r.status_code == 204
        assert (await ann.get("/auth/me")).status_code == 401
        assert (await users.ann.get("/auth/me")).status_code == 401
        assert await _login(users.server, "ann", PASSWORD) == 401
        assert await _login(users.server, "ann", NEW) == 200
        # an admin resetting their own password stays signed in with this token
        admin_id = (await users.admin.get("/auth/me")).json()["user_id"]
        r = await users.admin.post(f"/users/{admin_id}/password", json={"password": NEW})
        assert r.status_code == 204 and (await users.admin.get("/auth/me")).status_code == 200


async def test_local_mode_has_no_passwords(local: LiveServer) -> None:
    async with local.client() as c:
        body = {"old_password": PASSWORD, "new_password": NEW}
        r = await c.post("/auth/password", json=body)
    assert r.status_code == 400 and r.json()["error"]["type"] == "ServerConfigError"
