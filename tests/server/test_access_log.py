"""The access log over a real uvicorn on loopback: one JSON line per request on the
``tavernkit.access`` logger, with the route's template instead of the path, the status, the
duration and a hash of the user, and no token, cookie, id or query string in it."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from tavernkit.server.access_log import ACCESS_LOGGER, user_hash

from .conftest import PASSWORD, Users

SECRET = "sk-canary-0042"


def access_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == ACCESS_LOGGER]


async def test_a_request_logs_one_line_of_its_route_status_time_and_user(
    users: Users, caplog: pytest.LogCaptureFixture
) -> None:
    admin_id = users.server.state.accounts
    user, _ = await admin_id.store.find_user("ann")
    with caplog.at_level(logging.INFO, logger=ACCESS_LOGGER):
        response = await users.ann.get(f"/characters/Seraphina-{SECRET}?api_key={SECRET}")
    assert response.status_code == 404
    (line,) = access_lines(caplog)
    assert set(line) == {"method", "path", "status", "duration_ms", "user"}
    assert line["method"] == "GET" and line["path"] == "/characters/{ref}"
    assert line["status"] == 404 and isinstance(line["duration_ms"], float)
    assert line["user"] == user_hash(user.id) != user.id


async def test_no_secret_reaches_the_access_log(
    users: Users, caplog: pytest.LogCaptureFixture
) -> None:
    token = users.ann.headers["Authorization"].partition(" ")[2]
    async with users.server.client() as browser:
        with caplog.at_level(logging.DEBUG, logger=ACCESS_LOGGER):
            login = await browser.post("/auth/login", json={"name": "ann", "password": PASSWORD})
            cookies = list(browser.cookies.values())
            await browser.get(f"/nowhere/{SECRET}?token={SECRET}")
            by_cookie = await browser.get("/characters")
            await users.ann.get(f"/characters?q={SECRET}")
            browser.cookies.clear()
            stranger = {"Authorization": f"Bearer {SECRET}"}
            refused = await browser.get("/characters", headers=stranger)
    assert login.status_code == 200 and cookies and by_cookie.status_code == 200
    assert refused.status_code == 401
    text = "\n".join(r.getMessage() for r in caplog.records)
    lines = access_lines(caplog)
    assert [line["path"] for line in lines] == [
        "/auth/login",
        "(unmatched)",
        "/characters",
        "/characters",
        "/characters",
    ]
    assert lines[2]["user"] == lines[3]["user"] is not None  # ann by cookie, then by token
    assert lines[-1]["user"] is None  # the unknown token established no one
    for secret in (SECRET, token, PASSWORD, *cookies):
        assert secret not in text
