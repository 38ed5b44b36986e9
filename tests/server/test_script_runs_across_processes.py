"""Scripts that ask the user, served by several ``tavernkit serve`` processes on one PostgreSQL
and one Redis (a round-robin proxy sends each request anywhere): a question asked by a run in
A is listed through B, an answer given through B reaches the run in A and the script goes on
with it; when the process that runs a script dies, its question leaves the listing and an
answer to it is told the run ended (404), without waiting on it.

The processes live for the whole module (starting one costs seconds); each test makes its
own chat.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx
import pytest
import pytest_asyncio

from _services import PostgresCluster, RedisServer
from tavernkit.facade import Tavern

from ._cards import card_file
from ._processes import ServeProcess, shared_database, start_serve

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class Trio:
    a: ServeProcess
    b: ServeProcess
    #: a third process, for the test that kills the one running a script
    doomed: ServeProcess


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def trio(
    postgres_cluster: PostgresCluster,
    redis_server: RedisServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Trio]:
    async with shared_database(postgres_cluster, redis_server) as database:
        root = tmp_path_factory.mktemp("script-runs")
        args = ("--database", database, "--redis", redis_server.url)
        env = {"TAVERNKIT_KEY_DIR": str(root / "keys")}
        async with Tavern(root / "setup", database=database):
            pass  # the tables exist before three processes open the database at once
        a, b, doomed = await asyncio.gather(
            start_serve(root / "home-a", *args, env=env),
            start_serve(root / "home-b", *args, env=env),
            start_serve(root / "home-c", *args, env=env),
        )
        try:
            async with a.client() as client:
                r = await client.post("/import", files={"file": card_file("Mira")})
                assert r.status_code == 201, r.text
            yield Trio(a, b, doomed)
        finally:
            await asyncio.gather(a.stop(), b.stop(), doomed.stop())


async def _chat(client: httpx.AsyncClient) -> str:
    r = await client.post("/chats", json={"character": "Mira"})
    assert r.status_code == 201, r.text
    chat: str = r.json()["id"]
    return chat


async def _start(client: httpx.AsyncClient, chat: str, script: str) -> dict[str, Any]:
    r = await client.post(f"/chats/{chat}/script", json={"script": script, "interactive": True})
    assert r.status_code == 200, r.text
    step: dict[str, Any] = r.json()
    assert step["status"] == "asking", step
    return step


async def _answer(
    client: httpx.AsyncClient, chat: str, step: dict[str, Any], **answer: Any
) -> httpx.Response:
    url = f"/chats/{chat}/script/runs/{step['run']}/answer"
    return await client.post(url, json={"question": step["question"]["id"], **answer})


async def _listed(client: httpx.AsyncClient, chat: str) -> list[dict[str, Any]]:
    r = await client.get(f"/chats/{chat}/script/runs")
    assert r.status_code == 200, r.text
    runs: list[dict[str, Any]] = r.json()["runs"]
    return runs


async def test_a_question_asked_in_a_is_listed_and_answered_through_b(trio: Trio) -> None:
    async with trio.a.client() as a, trio.b.client() as b:
        chat = await _chat(a)
        assert await _listed(b, chat) == []
        first = await _start(
            a,
            chat,
            "/input default=Bo Your name? | /sendas name=Mira Hi {{pipe}} | "
            '/buttons labels=["Fight","Flee"] What now? | /pass {{pipe}}',
        )
        assert first["question"]["text"] == "Your name?"
        assert await _listed(b, chat) == [first]  # the reloaded page, served by B
        r = await _answer(b, chat, first, button="ok", text="Ada")
        assert r.status_code == 200, r.text
        second = r.json()
        assert second["status"] == "asking" and second["run"] == first["run"]
        assert second["question"]["kind"] == "buttons" and second["question"]["id"] == 2
        assert await _listed(a, chat) == [second] == await _listed(b, chat)
        messages = (await b.get(f"/chats/{chat}/messages", params={"limit": 1})).json()
        assert messages["items"][0]["data"]["mes"] == "Hi Ada"  # the run in A had the answer
        done = await _answer(b, chat, second, button="ok", chosen=[1])
        assert done.status_code == 200, done.text
        assert done.json()["status"] == "done" and done.json()["pipe"] == "Flee"
        assert await _listed(a, chat) == [] == await _listed(b, chat)


async def test_a_refused_answer_through_b_is_the_owners_typed_error(trio: Trio) -> None:
    async with trio.a.client() as a, trio.b.client() as b:
        chat, other = await _chat(a), await _chat(a)
        step = await _start(a, chat, "/input Name? | /pass {{pipe}}")
        wrong = {**step, "question": {**step["question"], "id": 7}}
        for client, where, asked in ((b, chat, wrong), (b, other, step), (a, other, step)):
            r = await _answer(client, where, asked, button="ok", text="x")
            assert r.status_code == 404, r.text
            assert r.json()["error"]["type"] == "NotFound"
        assert await _listed(b, other) == []
        done = await _answer(b, chat, step, button="ok", text="Rhea")
        assert done.json()["pipe"] == "Rhea"
        again = await _answer(b, chat, step, button="ok", text="twice")
        assert again.status_code == 404 and again.json()["error"]["type"] == "NotFound"


async def test_when_the_running_process_dies_its_question_goes_and_answers_end(
    trio: Trio,
) -> None:
    """One run's question is open; another run's answer, taken by B, waits on the run (a
    ``/delay`` after the question) when the process running both is killed: the waiting
    answer ends with a 404 saying the run ended, the open question leaves the listing, and
    answering it is refused the same way, each within seconds."""
    async with trio.doomed.client() as doomed, trio.b.client() as b:
        chat, busy_chat = await _chat(b), await _chat(b)
        step = await _start(doomed, chat, "/input Name? | /sendas name=Mira {{pipe}}")
        busy = await _start(doomed, busy_chat, "/input Name? | /delay 60000 | /pass {{pipe}}")
        assert await _listed(b, chat) == [step]
        waiting = asyncio.create_task(_answer(b, busy_chat, busy, button="ok", text="Ada"))
        await asyncio.sleep(1.0)  # the run took the answer and sleeps
        assert not waiting.done() and await _listed(b, busy_chat) == []
        await trio.doomed.kill()
        began = time.monotonic()
        ended = await asyncio.wait_for(waiting, 15)
        waited = time.monotonic() - began
        assert await _listed(b, chat) == []
        began = time.monotonic()
        refused = await _answer(b, chat, step, button="ok", text="too late")
        took = time.monotonic() - began
    for r in (ended, refused):
        assert r.status_code == 404, r.text
        error = r.json()["error"]
        assert error["type"] == "NotFound" and "ended" in error["message"], error
    assert waited < 10 and took < 10, (waited, took)
