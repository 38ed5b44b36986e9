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
