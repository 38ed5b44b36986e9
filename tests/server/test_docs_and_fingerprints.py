"""Issue 34, findings 9 and 10 against real servers: key fingerprints keyed per install, and no
third-party docs page on the session cookie's origin."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from ._live import LiveServer, live_server
from .conftest import Users, settings

KEY = "sk-fingerprint-test-0123456789"


def _printed(summary: dict[str, object]) -> str:
    (label,) = summary["keys"]  # type: ignore[misc]
    found = re.fullmatch(r".* \(([0-9a-f]{12})\)", str(label))
    assert found, label
    return found.group(1)


async def test_the_api_shows_a_keyed_stable_fingerprint(users: Users, tmp_path: Path) -> None:
    made = await users.ann.post("/profiles", json={"name": "one", "keys": [KEY]})
    assert made.status_code == 201, made.text
    printed = _printed(made.json())
    assert printed != hashlib.sha256(KEY.encode()).hexdigest()[:12]
    # the same key is shown the same way: in the listing, in another profile, for another user
    listed = (await users.ann.get("/profiles/one")).json()
    assert _printed(listed) == printed
    again = await users.ann.post("/profiles", json={"name": "two", "keys": [KEY]})
    assert _printed(again.json()) == printed
    bobs = await users.bob.post("/profiles", json={"name": "b", "keys": [KEY]})
    assert _printed(bobs.json()) == printed
    # another install (another home, so another secret) prints the same key differently
    async with live_server(settings(tmp_path / "other")) as other, other.client() as client:
        there = await client.post("/profiles", json={"name": "one", "keys": [KEY]})
        assert there.status_code == 201, there.text
        assert _printed(there.json()) != printed


async def test_with_accounts_on_the_cdn_docs_are_off_and_the_schema_stays(users: Users) -> None:
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        answer = await users.ann.get(path)
        assert answer.status_code == 404, path
        assert answer.json()["error"]["type"] == "HTTPError"
        assert "cdn" not in answer.text.lower()
    schema = await users.ann.get("/openapi.json")
    assert schema.status_code == 200
    assert "/characters" in schema.json()["paths"]


async def test_the_local_mode_keeps_its_docs(local: LiveServer) -> None:
    async with local.client() as client:
        assert (await client.get("/docs")).status_code == 200
        assert (await client.get("/openapi.json")).status_code == 200
