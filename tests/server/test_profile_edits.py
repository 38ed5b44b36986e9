"""Editing a connection profile over a real uvicorn: ``PATCH`` changes its fields and keeps its
write-only keys (or replaces the pool, deleting the old keys), sets its response review; ``PUT
.../fallbacks`` sets its chain and randomizer; a refused edit stores nothing."""

from __future__ import annotations

from typing import Any

from ._live import LiveServer
from .conftest import Users

SECRET = "sk-edit-0123456789abcdef"
NEW_SECRET = "sk-new-fedcba9876543210"


async def _key_ids(server: LiveServer) -> list[str]:
    tk = server.state.tavern
    return [k.id for k in await tk.store.list_api_keys(owner=tk.owner)]


async def test_an_edit_keeps_the_keys_unless_it_replaces_them(local: LiveServer) -> None:
    async with local.client() as c:
        r = await c.post("/profiles", json={"name": "oa", "model": "m1", "keys": [SECRET]})
        assert r.status_code == 201, r.text
        keys = r.json()["keys"]
        before = await _key_ids(local)
        body: dict[str, Any] = {
            "api": "text",
            "model": "m2",
            "base_url": "http://127.0.0.1:9/v1",
            "timeouts": {"first_byte": 300},
        }
        r = await c.patch("/profiles/oa", json=body)
        assert r.status_code == 200, r.text
        got = r.json()
        assert (got["api"], got["model"], got["base_url"]) == ("text", "m2", body["base_url"])
        assert got["timeouts"]["first_byte"] == 300 and got["keys"] == keys
        assert await _key_ids(local) == before
        # clearing: the model goes, the source cannot
        r = await c.patch("/profiles/oa", json={"model": None})
        assert r.status_code == 200 and r.json()["model"] is None
        r = await c.patch("/profiles/oa", json={"source": None})
        assert r.status_code == 422 and r.json()["error"]["field"] == "source"
        r = await c.patch("/profiles/oa", json={"nope": 1})
        assert r.status_code == 422
        # a new pool replaces the old one; the old key is deleted
        r = await c.patch("/profiles/oa", json={"keys": [NEW_SECRET, "env:OTHER_KEY"]})
        assert r.status_code == 200, r.text
        assert len(r.json()["keys"]) == 2 and r.json()["keys"][1] == "$OTHER_KEY"
        after = await _key_ids(local)
        assert len(after) == 1 and after[0] not in before
        for answer in (r, await c.get("/profiles/oa")):
            assert SECRET not in answer.text and NEW_SECRET not in answer.text
        assert (await c.patch("/profiles/none", json={"model": "x"})).status_code == 404


async def test_review_and_fallbacks(local: LiveServer) -> None:
    async with local.client() as c:
        for name in ("main", "backup", "judge"):
            assert (await c.post("/profiles", json={"name": name, "model": "m"})).status_code == 201
        r = await c.patch("/profiles/main", json={"review": {"reviewer_profile": "judge"}})
        assert r.status_code == 200 and r.json()["review"]["reviewer_profile"] == "judge"
        r = await c.patch("/profiles/main", json={"review": {"reviewer_profile": "nobody"}})
        assert r.status_code == 404
        r = await c.patch("/profiles/main", json={"review": None})
        assert r.status_code == 200 and r.json()["review"] is None

        chain = {"entries": [{"profile": "backup"}, {"profile": "main", "model": "m-big"}]}
        r = await c.put("/profiles/main/fallbacks", json={**chain, "randomize": True})
        assert r.status_code == 200, r.text
        assert r.json()["fallbacks"] == ["backup", "main:m-big"] and r.json()["randomize"]
        stored = await local.state.tavern.profiles.fallbacks("main")
        assert [(e.profile, e.model) for e in stored] == [("backup", None), ("main", "m-big")]
        # refused, and nothing changes: a missing profile, itself with its own model, twice
        for bad, status in (
            ([{"profile": "nobody"}], 404),
            ([{"profile": "main"}], 409),
            ([{"profile": "backup"}, {"profile": "backup"}], 409),
        ):
            r = await c.put("/profiles/main/fallbacks", json={"entries": bad})
            assert r.status_code == status, (bad, r.text)
        assert (await c.get("/profiles/main")).json()["fallbacks"] == ["backup", "main:m-big"]
        r = await c.put("/profiles/main/fallbacks", json={"entries": []})
        assert r.json()["fallbacks"] == [] and not r.json()["randomize"]


async def test_server_keys_in_an_edit_are_an_admins(users: Users) -> None:
    r = await users.ann.post("/profiles", json={"name": "p", "keys": [SECRET]})
    assert r.status_code == 201
    r = await users.ann.patch("/profiles/p", json={"keys": ["env:HOME"]})
    assert r.status_code == 403 and r.json()["error"]["type"] == "PermissionDenied"
