"""Error answers carry a stable ``code`` and named ``params`` beside the English message, so
a client can say each error in its user's language (a real server, a scripted upstream): the
errors a user meets most — a request that fails validation, a record not found, a name taken,
a stale revision, a broken import file, an upstream's rate limit, a rate-limited or wrong
login — each with the parameters its message needs, and the old keys as they were."""

from __future__ import annotations

import json

from chat._server import Reply

from ._cards import card
from ._site import Site, site
from .conftest import Users

__all__ = ["site"]  # the fixture, used by name


async def test_a_validation_error_names_the_field_the_problem_and_the_limit(site: Site) -> None:
    chat = await site.new_chat()
    r = await site.start(chat, overrides={"profile": "p" * 201})
    assert r.status_code == 422
    error = r.json()["error"]
    assert (error["type"], error["field"], error["code"]) == (
        "ValidationError",
        "body.overrides.profile",
        "invalid",
    )
    assert error["params"] == {
        "field": "body.overrides.profile",
        "problem": "string_too_long",
        "max_length": 200,
    }
    assert "p" * 201 not in r.text  # the input itself is never echoed
    missing = await site.client.post("/groups", json={"members": ["Mira"]})
    assert missing.json()["error"]["params"] == {"field": "body.name", "problem": "missing"}


async def test_not_found_and_name_taken_name_the_kind_and_the_name(site: Site) -> None:
    gone = await site.client.get("/characters/Nobody")
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "not_found"
    assert gone.json()["error"]["params"] == {"kind": "character", "name": "Nobody"}

    other = card("Mira")
    other["data"]["description"] = "Another Mira altogether."
    taken = await site.client.post(
        "/import", files={"file": ("mira.json", json.dumps(other).encode())}
    )
    assert taken.status_code == 409, taken.text
    error = taken.json()["error"]
    assert (error["type"], error["code"]) == ("NameTaken", "name_taken")
    assert error["params"] == {"kind": "character", "name": "Mira"}


async def test_a_stale_revision_and_a_broken_file_carry_what_to_say(site: Site) -> None:
    chat = await site.new_chat()
    url = f"/chats/{chat}/messages/0"
    stale = await site.client.patch(url, json={"text": "Mine"}, headers={"If-Match": '"old"'})
    assert stale.status_code == 409, stale.text
    error = stale.json()["error"]
    assert (error["type"], error["code"], error["params"]) == (
        "StaleRevision",
        "stale_revision",
        {},
    )
    assert error["revision"]  # as before: the current revision, to reload

    broken = b'{"spec": "chara_card_v2",\n "data": {"name": "Wren",}}'
    r = await site.client.post("/import", files={"file": ("wren.json", broken)})
    assert r.status_code == 422
    error = r.json()["error"]
    assert error["code"] == "invalid"
    assert error["params"] == {"source": "wren.json", "line": 2, "column": 26}


async def test_an_upstreams_rate_limit_says_whether_it_is_a_quota(site: Site) -> None:
    site.upstream.script(Reply(status=429, error={"error": {"message": "slow sk-live-9"}}))
    r = await site.client.post(
        "/tasks", json={"task_messages": [{"role": "user", "content": "Name a ship."}]}
    )
    assert r.status_code == 429
    error = r.json()["error"]
    assert error["code"] == "rate_limit"
    assert error["params"]["quota"] is False  # waiting helps (a used-up quota would not)
    assert "sk-live-9" not in r.text


async def test_login_refusals_say_why(users: Users) -> None:
    async with users.server.client() as c:
        wrong = await c.post("/auth/login", json={"name": "ann", "password": "not it"})
        assert wrong.status_code == 401
        assert wrong.json()["error"]["code"] == "not_authenticated"
        assert wrong.json()["error"]["params"] == {"reason": "wrong_credentials"}
        for _ in range(6):
            last = await c.post("/auth/login", json={"name": "ann", "password": "not it"})
        assert last.status_code == 429
        error = last.json()["error"]
        assert error["code"] == "too_many_attempts"
        assert error["params"]["reason"] == "logins" and error["params"]["retry_after"] >= 1
