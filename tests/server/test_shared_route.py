"""Whose key pays: a user's turn uses their own keys first and falls back to the server's
shared pool only after those failed, only when the user and the admin allow it, and only
after the pool's cooldown and quota admission; the server then pays. Two users, one shared
pool, a scripted OpenAI-compatible upstream on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx
import pytest

from generation._scripted_server import Reply, ScriptedServer
from tavernkit.chat.reply import TurnOutcome
from tavernkit.server.principal import Principal
from tavernkit.server.settings import RateLimit

from ._cards import card_file
from ._live import LiveServer, live_server
from ._sse import parse_events
from .conftest import LOOPBACK, PASSWORD, settings, token_client

BAD_KEY = Reply(status=401, error={"error": {"message": "bad key", "code": "invalid_api_key"}})
POOL_KEY = "sk-shared-pool-0001"


@dataclass
class Pool:
    server: LiveServer
    upstream: ScriptedServer
    admin: httpx.AsyncClient
    ann: httpx.AsyncClient
    bob: httpx.AsyncClient

    async def principal(self, name: str) -> Principal:
        user, _ = await self.server.state.accounts.store.find_user(name)
        return Principal(user_id=user.id, owner=user.owner, is_admin=False, via="token")

    async def turn(self, name: str, chat: str) -> TurnOutcome:
        view = self.server.state.tavern_for(await self.principal(name))
        return await view.chats.send(chat, "hello")

    def keys_used(self) -> list[str]:
        return [r.headers.get("authorization", "") for r in self.upstream.requests]


async def _own_chat(client: httpx.AsyncClient, upstream: ScriptedServer, key: str) -> str:
    r = await client.post(
        "/profiles",
        json={
            "name": "mine",
            "base_url": upstream.base_url + "/v1",
            "model": "m-own",
            "keys": [key],
            "activate": True,
        },
    )
    assert r.status_code == 201, r.text
    await client.post("/import", files={"file": card_file("Mira")})
    return str((await client.post("/chats", json={"character": "Mira"})).json()["id"])


@pytest.fixture
async def pool(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Pool]:
    fields: dict[str, object] = {
        "shared_profile": "pool",
        "shared_rate": RateLimit(5, 3600.0),
        **LOOPBACK,  # the users' own profiles point at the loopback upstream too
    }
    fields.update(getattr(request, "param", {}))
    conf = settings(tmp_path / "home", accounts=True, **fields)
    async with ScriptedServer() as upstream, live_server(conf) as server:
        accounts = server.state.accounts
        for name in ("admin", "ann", "bob"):
            await accounts.create_user(name, PASSWORD, is_admin=name == "admin")
        clients = [await token_client(server, n) for n in ("admin", "ann", "bob")]
        r = await clients[0].post(
            "/shared/profiles",
            json={
                "name": "pool",
                "base_url": upstream.base_url + "/v1",
                "model": "m-pool",
                "keys": [POOL_KEY],
            },
        )
        assert r.status_code == 201, r.text
        try:
            yield Pool(server, upstream, *clients)
        finally:
            for c in clients:
                await c.aclose()


async def test_personal_failure_falls_back_to_the_pool_and_the_server_pays(pool: Pool) -> None:
    chat = await _own_chat(pool.ann, pool.upstream, "sk-ann-own")
    pool.upstream.script(BAD_KEY, Reply(text="from the pool"))
    outcome = await pool.turn("ann", chat)
    assert outcome.status == "completed" and outcome.text == "from the pool"
    assert pool.keys_used() == ["Bearer sk-ann-own", f"Bearer {POOL_KEY}"]
    assert outcome.result is not None
    ann = await pool.principal("ann")
    paid = [(a.paid_by, a.outcome) for a in outcome.result.attempts]
    assert paid[0][0] == f"user:{ann.owner}" and paid[-1][0] == "server:server"
    # the pool's profile and key are the server's: no user sees them
    for client in (pool.ann, pool.bob):
        listed = (await client.get("/profiles")).text
        assert "pool" not in listed and POOL_KEY not in listed
    assert (await pool.ann.get("/shared/profiles")).status_code == 403


async def test_a_turn_the_own_keys_answer_never_touches_the_pool(pool: Pool) -> None:
    chat = await _own_chat(pool.ann, pool.upstream, "sk-ann-own")
    pool.upstream.script(Reply(text="mine"))
    outcome = await pool.turn("ann", chat)
    assert outcome.text == "mine"
    assert pool.keys_used() == ["Bearer sk-ann-own"]
    # no quota was spent: all five fallbacks are still there
    decision = await pool.server.state.limiter.hit(
        f"shared:{(await pool.principal('ann')).user_id}", limit=5, window_s=3600.0
    )
    assert decision.allowed


async def test_the_users_setting_withholds_the_pool(pool: Pool) -> None:
    r = await pool.bob.put("/auth/me/shared-fallback", json={"allowed": False})
    assert r.json() == {"allowed": False}
    assert (await pool.bob.get("/auth/me/shared-fallback")).json() == {"allowed": False}
    bob_chat = await _own_chat(pool.bob, pool.upstream, "sk-bob-own")
    ann_chat = await _own_chat(pool.ann, pool.upstream, "sk-ann-own")
    pool.upstream.script(BAD_KEY)
    assert (await pool.turn("bob", bob_chat)).status != "completed"
    assert pool.keys_used() == ["Bearer sk-bob-own"]
    # ann's setting is hers: she still falls back
    pool.upstream.script(BAD_KEY, Reply(text="pool for ann"))
    assert (await pool.turn("ann", ann_chat)).text == "pool for ann"


@pytest.mark.parametrize("pool", [{"shared_fallback": False}], indirect=True)
async def test_the_admins_policy_withholds_the_pool(pool: Pool) -> None:
    chat = await _own_chat(pool.ann, pool.upstream, "sk-ann-own")
    pool.upstream.script(BAD_KEY)
    assert (await pool.turn("ann", chat)).status != "completed"
    assert pool.keys_used() == ["Bearer sk-ann-own"]


@pytest.mark.parametrize("pool", [{"shared_rate": RateLimit(1, 3600.0)}], indirect=True)
async def test_the_pools_quota_admits_each_user_so_often(pool: Pool) -> None:
    ann_chat = await _own_chat(pool.ann, pool.upstream, "sk-ann-own")
    bob_chat = await _own_chat(pool.bob, pool.upstream, "sk-bob-own")
    pool.upstream.script(BAD_KEY, Reply(text="pool 1"))
    assert (await pool.turn("ann", ann_chat)).text == "pool 1"
    pool.upstream.requests.clear()
    pool.upstream.script(BAD_KEY)
    assert (await pool.turn("ann", ann_chat)).status != "completed"
    assert pool.keys_used() == ["Bearer sk-ann-own"]  # refused before any pool key
    pool.upstream.requests.clear()
    pool.upstream.script(BAD_KEY, Reply(text="pool for bob"))
    assert (await pool.turn("bob", bob_chat)).text == "pool for bob"  # his own quota


async def test_a_cooling_pool_is_not_admitted(pool: Pool) -> None:
    second = "sk-shared-pool-0002"
    r = await pool.admin.post(
        "/shared/profiles",
        json={
            "name": "pool",
            "base_url": pool.upstream.base_url + "/v1",
            "model": "m-pool",
            "keys": [POOL_KEY, second],
            "replace": True,
        },
    )
    assert r.status_code == 201, r.text
    chat = await _own_chat(pool.ann, pool.upstream, "sk-ann-own")
    limited = Reply(
        status=429, error={"error": {"message": "slow"}}, headers={"retry-after": "600"}
    )
    pool.upstream.script(BAD_KEY, limited, limited)
    assert (await pool.turn("ann", chat)).status != "completed"
    used = pool.keys_used()
    assert used[0] == "Bearer sk-ann-own"
    assert sorted(used[1:]) == sorted([f"Bearer {POOL_KEY}", f"Bearer {second}"])
    pool.upstream.requests.clear()
    pool.upstream.script(BAD_KEY, Reply(text="never"))
    assert (await pool.turn("ann", chat)).status != "completed"
    assert pool.keys_used() == ["Bearer sk-ann-own"]  # both pool keys are cooling


async def test_a_pool_of_one_key_rests_after_a_rate_limit(pool: Pool) -> None:
    chat = await _own_chat(pool.ann, pool.upstream, "sk-ann-own")
    limited = Reply(
        status=429, error={"error": {"message": "slow"}}, headers={"retry-after": "600"}
    )
    pool.upstream.script(BAD_KEY, limited)
    assert (await pool.turn("ann", chat)).status != "completed"
    assert pool.keys_used() == ["Bearer sk-ann-own", f"Bearer {POOL_KEY}"]
    # the lone pool key is resting: neither ann nor bob is let through to it
    bob_chat = await _own_chat(pool.bob, pool.upstream, "sk-bob-own")
    for name, own, which in (("ann", "sk-ann-own", chat), ("bob", "sk-bob-own", bob_chat)):
        pool.upstream.requests.clear()
        pool.upstream.script(BAD_KEY, Reply(text="never"))
        assert (await pool.turn(name, which)).status != "completed"
        assert pool.keys_used() == [f"Bearer {own}"]


async def test_a_task_falls_back_to_the_pool_as_a_turn_does(pool: Pool) -> None:
    """``POST /tasks`` and the facade's character models plan like a chat turn: own keys
    first, then the shared pool, paid by the server."""
    chat = await _own_chat(pool.ann, pool.upstream, "sk-ann-own")
    pool.upstream.script(BAD_KEY, Reply(text="task from the pool"))
    r = await pool.ann.post(
        "/tasks", json={"task_messages": [{"role": "user", "content": "Hi"}], "chat_id": chat}
    )
    assert r.status_code == 200, r.text
    assert r.json()["assistant_text"] == "task from the pool"
    assert pool.keys_used() == ["Bearer sk-ann-own", f"Bearer {POOL_KEY}"]
    pool.upstream.requests.clear()
    pool.upstream.script(BAD_KEY, Reply(text="facade from the pool"))
    models = (await pool.ann.get("/v1/models")).json()["data"]
    mira = next(m["id"] for m in models if "Mira" in m["id"])
    r = await pool.ann.post(
        "/v1/chat/completions",
        json={"model": mira, "messages": [{"role": "user", "content": "Hi"}]},
    )
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "facade from the pool"
    assert pool.keys_used() == ["Bearer sk-ann-own", f"Bearer {POOL_KEY}"]


# -- issue 34, finding 7: the shared route's answers are not the profile's, and its model and
# provider stay the server's; an admin's cap on what the server pays for holds everywhere


async def test_a_connection_test_tests_the_profile_never_the_pool(pool: Pool) -> None:
    """``POST /ui/profiles/{name}/test`` answers for the profile: its failing key is a failed
    test, not the shared pool's answer (nor a fallback of its chain's)."""
    await _own_chat(pool.ann, pool.upstream, "sk-ann-own")
    pool.upstream.script(BAD_KEY, Reply(text="OK from the pool"))
    r = await pool.ann.post("/ui/profiles/mine/test")
    assert r.status_code == 200, r.text
    checked = r.json()
    assert checked["ok"] is False and checked["code"] == "auth_missing", checked
    assert pool.keys_used() == ["Bearer sk-ann-own"]
    # a chain's fallback that works does not make the profile's test pass either
    spare = {"name": "spare", "base_url": pool.upstream.base_url + "/v1", "model": "m-spare"}
    assert (await pool.ann.post("/profiles", json={**spare, "keys": ["sk-spare"]})).is_success
    r = await pool.ann.put("/profiles/mine/fallbacks", json={"entries": [{"profile": "spare"}]})
    assert r.is_success, r.text
    pool.upstream.requests.clear()
    pool.upstream.script(BAD_KEY, Reply(text="OK from the spare"))
    assert (await pool.ann.post("/ui/profiles/mine/test")).json()["ok"] is False
    assert pool.keys_used() == ["Bearer sk-ann-own"]
    # the profile's own good key passes
    pool.upstream.requests.clear()
    pool.upstream.script(Reply(text="OK"))
    assert (await pool.ann.post("/ui/profiles/mine/test")).json() == {
        "ok": True,
        "text": "OK",
        "code": None,
        "message": None,
    }


async def test_what_a_user_is_shown_never_names_the_shared_model(pool: Pool) -> None:
    """A turn the pool answered: its fallback notice says "the server's shared connection",
    and neither the turn's events, nor the stored reply, nor a task's result name the shared
    profile, its model or its upstream's model."""
    chat = await _own_chat(pool.ann, pool.upstream, "sk-ann-own")
    pool.upstream.script(BAD_KEY, Reply(text="a shared answer"))
    r = await pool.ann.post(f"/chats/{chat}/turns", json={"kind": "send", "text": "hello"})
    assert r.status_code == 202, r.text
    stream = await pool.ann.get(r.json()["events"])
    events = parse_events(stream.content)
    assert events[-1].type == "done" and events[-1].data["status"] == "completed"
    notice = next(e.data for e in events if e.type == "notice" and e.data["kind"] == "fallback")
    assert notice["text"].startswith("Answered by the server's shared connection (slot 2).")
    assert notice["model"] == "the server's shared connection"
    assert [f["model"] for f in notice["failures"]] == ["m-own"]  # her own model she knows
    shown = stream.text + (await pool.ann.get(f"/chats/{chat}/messages")).text
    for secret in ("m-pool", "pool", "scripted", POOL_KEY):
        assert secret not in shown, secret
    assert events[-1].data["model"] == "the server's shared connection"
    # a task's result (a JSON reply: the upstream names its model) says the same
    pool.upstream.requests.clear()
    pool.upstream.script(BAD_KEY, Reply(text="a shared task answer"))
    r = await pool.ann.post(
        "/tasks", json={"task_messages": [{"role": "user", "content": "Hi"}], "chat_id": chat}
    )
    assert r.status_code == 200, r.text
    assert r.json()["model"] == "the server's shared connection"
    assert "m-pool" not in r.text
    assert pool.keys_used() == ["Bearer sk-ann-own", f"Bearer {POOL_KEY}"]


@pytest.mark.parametrize("pool", [{"shared_max_tokens": 64}], indirect=True)
async def test_the_cap_on_server_paid_tokens_holds_for_turns_and_tasks(pool: Pool) -> None:
    """``shared_max_tokens``: a request the server pays for asks for at most that many output
    tokens (and that many when nothing asked for a limit), in a turn, a task or a facade
    completion; the user's own requests ask for what they set."""
    chat = await _own_chat(pool.ann, pool.upstream, "sk-ann-own")
    pool.upstream.script(BAD_KEY, Reply(text="turn from the pool"))
    body = {"kind": "send", "text": "hello", "overrides": {"max_tokens": 4000}}
    r = await pool.ann.post(f"/chats/{chat}/turns", json=body)
    assert r.status_code == 202, r.text
    events = parse_events((await pool.ann.get(r.json()["events"])).content)
    assert events[-1].data["status"] == "completed"
    asked = [_max_tokens(req.body) for req in pool.upstream.requests]
    assert asked == [4000, 64]
    # a task with a preset that asks for 4000, and one that asks for nothing
    preset = {"name": "long", "openai_max_tokens": 4000}
    assert (await pool.ann.post("/presets/chat", json=preset)).status_code == 201
    for extra, own in (({"llm_preset_name": "long"}, 4000), ({}, None)):
        pool.upstream.requests.clear()
        pool.upstream.script(BAD_KEY, Reply(text="task from the pool"))
        task = {"task_messages": [{"role": "user", "content": "Hi"}], "chat_id": chat, **extra}
        r = await pool.ann.post("/tasks", json=task)
        assert r.status_code == 200, r.text
        assert pool.keys_used() == ["Bearer sk-ann-own", f"Bearer {POOL_KEY}"]
        asked = [_max_tokens(req.body) for req in pool.upstream.requests]
        assert asked[1] == 64 and (own is None or asked[0] == own), asked
    # and a facade completion on a character model
    pool.upstream.requests.clear()
    pool.upstream.script(BAD_KEY, Reply(text="facade from the pool"))
    models = (await pool.ann.get("/v1/models")).json()["data"]
    mira = next(m["id"] for m in models if "Mira" in m["id"])
    completion = {"model": mira, "messages": [{"role": "user", "content": "Hi"}]}
    r = await pool.ann.post("/v1/chat/completions", json={**completion, "max_tokens": 4000})
    assert r.status_code == 200, r.text
    assert pool.keys_used() == ["Bearer sk-ann-own", f"Bearer {POOL_KEY}"]
    assert _max_tokens(pool.upstream.requests[1].body) == 64


def _max_tokens(body: dict[str, object]) -> object:
    return body.get("max_tokens", body.get("max_completion_tokens"))
