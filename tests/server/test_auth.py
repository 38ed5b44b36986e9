"""Accounts and access over a real uvicorn: the local mode's guards, logins, sessions with
CSRF, API tokens, admin-only user management and the login rate limit."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from tavernkit.errors import ServerConfigError
from tavernkit.server.app import create_app
from tavernkit.server.settings import ServerSettings, is_loopback
from tavernkit.store.paths import DB_FILE_NAME

from ._live import LiveServer
from .conftest import PASSWORD, Users


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "::", "example.org"])
def test_non_loopback_without_accounts_refuses_to_start(host: str) -> None:
    with pytest.raises(ServerConfigError, match="without accounts"):
        create_app(ServerSettings(host=host))
    create_app(ServerSettings(host=host, accounts=True))


def test_loopback_names() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.3.4.5", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "localhost.evil"))


async def test_local_mode_is_one_user_without_login(local: LiveServer) -> None:
    async with local.client() as c:
        r = await c.get("/auth/me")
        assert r.status_code == 200
        assert r.json()["via"] == "local" and r.json()["is_admin"] is True
        # no accounts to sign in to
        r = await c.post("/auth/login", json={"name": "x", "password": "y"})
        assert r.status_code == 400
        assert r.json()["error"]["type"] == "ServerConfigError"


async def test_local_mode_refuses_rebinding_and_other_sites(local: LiveServer) -> None:
    async with local.client() as c:
        r = await c.get("/auth/me", headers={"Host": "attacker.example:8000"})
        assert r.status_code == 403
        assert r.json()["error"]["type"] == "PermissionDenied"
        r = await c.post("/auth/logout", headers={"Origin": "https://attacker.example"})
        assert r.status_code == 403
        # the server's own page (a loopback origin) may change things
        r = await c.get("/auth/me", headers={"Origin": "http://localhost:8000"})
        assert r.status_code == 200


async def test_no_credentials_is_401_typed(users: Users) -> None:
    async with users.server.client() as c:
        r = await c.get("/auth/me")
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    assert r.json()["error"]["type"] == "NotAuthenticated"
    for bad in ("Bearer tk_nope", "Basic abc", "Bearer"):
        async with users.server.client(headers={"Authorization": bad}) as c:
            assert (await c.get("/auth/me")).status_code == 401


async def test_wrong_password_and_unknown_user_answer_alike(users: Users) -> None:
    async with users.server.client() as c:
        a = await c.post("/auth/login", json={"name": "ann", "password": "wrong password"})
        b = await c.post("/auth/login", json={"name": "nobody", "password": "wrong password"})
    assert a.status_code == b.status_code == 401
    assert a.json() == b.json()


async def test_session_needs_csrf_for_changes(users: Users) -> None:
    async with users.server.client() as c:
        r = await c.post("/auth/login", json={"name": "ANN", "password": PASSWORD})
        assert r.status_code == 200
        cookie = r.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=lax" in cookie
        csrf = r.json()["csrf_token"]
        assert (await c.get("/auth/me")).json()["csrf_token"] == csrf
        r = await c.post("/auth/tokens", json={"label": "phone"})
        assert r.status_code == 403 and "X-CSRF-Token" in r.json()["error"]["message"]
        r = await c.post("/auth/tokens", json={"label": "phone"}, headers={"X-CSRF-Token": "x"})
        assert r.status_code == 403
        r = await c.post("/auth/tokens", json={"label": "phone"}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 201
        r = await c.post("/auth/logout", headers={"X-CSRF-Token": csrf})
        assert r.status_code == 204
        assert (await c.get("/auth/me")).status_code == 401


async def test_token_shown_once_and_stored_hashed(users: Users, tmp_path: Path) -> None:
    r = await users.ann.post("/auth/tokens", json={"label": "bot"})
    assert r.status_code == 201
    token = r.json()["token"]
    assert token.startswith("tk_")
    listed = (await users.ann.get("/auth/tokens")).json()
    assert [t["label"] for t in listed] == ["tests", "bot"]
    assert all("token" not in t for t in listed)
    async with users.server.client(headers={"Authorization": f"Bearer {token}"}) as c:
        assert (await c.get("/auth/me")).json()["name"] == "ann"
        db = sqlite3.connect(tmp_path / "home" / DB_FILE_NAME)
        try:
            dumped = "\n".join(db.iterdump())
            hashes = [row[0] for row in db.execute("SELECT password_hash FROM users")]
        finally:
            db.close()
        assert token not in dumped and PASSWORD not in dumped
        assert hashes and all(h.startswith("$argon2id$") for h in hashes)
        # bob cannot revoke ann's token; ann can, and then it stops working
        bob = await users.bob.delete(f"/auth/tokens/{r.json()['id']}")
        assert bob.status_code == 404
        assert (await users.ann.delete(f"/auth/tokens/{r.json()['id']}")).status_code == 204
        assert (await c.get("/auth/me")).status_code == 401


async def test_only_admin_manages_users(users: Users) -> None:
    body = {"name": "carol", "password": PASSWORD}
    r = await users.ann.post("/users", json=body)
    assert r.status_code == 403
    assert (await users.ann.get("/users")).status_code == 403
    r = await users.admin.post("/users", json=body)
    assert r.status_code == 201 and r.json()["is_admin"] is False
    r = await users.admin.post("/users", json={**body, "name": "CAROL"})
    assert r.status_code == 409 and r.json()["error"]["type"] == "Conflict"
    r = await users.admin.post("/users", json={"name": "dave", "password": "short"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "password"
    names = [u["name"] for u in (await users.admin.get("/users")).json()]
    assert names == ["admin", "ann", "bob", "carol"]
    admin_id = (await users.admin.get("/auth/me")).json()["user_id"]
    assert (await users.admin.delete(f"/users/{admin_id}")).status_code == 403
    carol = r = await users.admin.get("/users")
    carol_id = next(u["id"] for u in carol.json() if u["name"] == "carol")
    assert (await users.admin.delete(f"/users/{carol_id}")).status_code == 204
    async with users.server.client() as c:
        r = await c.post("/auth/login", json=body)
        assert r.status_code == 401


async def test_login_rate_limit_per_user(users: Users) -> None:
    async with users.server.client() as c:
        for _ in range(5):
            r = await c.post("/auth/login", json={"name": "bob", "password": "nope nope"})
            assert r.status_code == 401
        r = await c.post("/auth/login", json={"name": "bob", "password": PASSWORD})
        assert r.status_code == 429
        assert int(r.headers["retry-after"]) >= 1
        assert r.json()["error"]["type"] == "TooManyAttempts"
        # another user's logins are counted apart
        r = await c.post("/auth/login", json={"name": "ann", "password": PASSWORD})
        assert r.status_code == 200


async def test_no_password_or_token_in_logs(users: Users, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with users.server.client() as c:
        await c.post("/auth/login", json={"name": "ann", "password": "wrong password 123"})
        r = await c.post("/auth/login", json={"name": "ann", "password": PASSWORD})
        csrf = r.json()["csrf_token"]
        cookie = c.cookies["tavernkit_session"]
        token = (await c.post("/auth/tokens", json={}, headers={"X-CSRF-Token": csrf})).json()
    async with users.server.client(headers={"Authorization": f"Bearer {token['token']}"}) as c:
        assert (await c.get("/auth/me")).status_code == 200
    assert caplog.records  # the store and the server did log at DEBUG
    for secret in ("wrong password 123", PASSWORD, cookie, csrf, token["token"]):
        assert secret not in caplog.text
