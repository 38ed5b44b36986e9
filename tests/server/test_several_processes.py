"""Two real ``tavernkit serve`` processes on two loopback ports, sharing one PostgreSQL and one
Redis (tests/_services.py), with a scripted upstream: a turn started through A is resumed
through B byte for byte; two sends at once through A and B give one generation and one 409;
a 429 seen through A benches the key for B; a stop through B reaches A's turn; killing A
mid-turn leaves the partial reply marked and the chat free after the lock's lease.

The processes live for the whole module (starting one costs seconds), so the tests share one
event loop, one database and one upstream; each test makes its own chat.
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
from chat._server import HangingServer, HangReply, Reply
from chat.conftest import stock_world
from tavernkit.facade import Tavern

from ._processes import ServeProcess, shared_database, start_serve
from ._sse import Event, events_of, parse_events

pytestmark = pytest.mark.asyncio(loop_scope="module")

KEY_ONE, KEY_TWO = "sk-first-Zq8wXv7c", "sk-second-Mn4bVc1x"
#: the chat lock's lease in these processes: short, so the crash test waits little (not
#: shorter: a renewal every third of it must not miss under a loaded machine)
LEASE_S = 3.0


@dataclass
class Pair:
    a: ServeProcess
    b: ServeProcess
    upstream: HangingServer
    tk: Tavern
    #: a third process, for the crash test to kill
    doomed: ServeProcess

    async def new_chat(self) -> str:
        return (await self.tk.chats.new_chat("Mira")).id

    def hang(self, text: str) -> None:
        """The next reply streams its first word, then stalls until ``upstream.release``
        (the stalls of earlier tests end now: their clients are gone)."""
        self.upstream.release.set()
        self.upstream.release = asyncio.Event()
        self.upstream.hanging = asyncio.Event()
        self.upstream.script(HangReply(text=text, hang_after=1))


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def pair(
    postgres_cluster: PostgresCluster,
    redis_server: RedisServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Pair]:
    async with shared_database(postgres_cluster, redis_server) as database:
        root = tmp_path_factory.mktemp("two-processes")
        env = {
            "TAVERNKIT_KEY_DIR": str(root / "keys"),
            "TK_TEST_KEY_ONE": KEY_ONE,
            "TK_TEST_KEY_TWO": KEY_TWO,
        }
        args = ("--database", database, "--redis", redis_server.url, "--lock-lease", str(LEASE_S))
        async with HangingServer() as upstream, Tavern(root / "setup", database=database) as tk:
            await stock_world(tk, upstream.base_url)
            await tk.profiles.add(
                "scripted",
                base_url=upstream.base_url + "/v1",
                model="m1",
                keys=["env:TK_TEST_KEY_ONE", "env:TK_TEST_KEY_TWO"],
                replace=True,
            )
            # B takes the URLs from the environment, A and the doomed one from options
            by_env = {"TAVERNKIT_DATABASE_URL": database, "TAVERNKIT_REDIS_URL": redis_server.url}
            a, b, doomed = await asyncio.gather(
                start_serve(root / "home-a", *args, env=env),
                start_serve(root / "home-b", "--lock-lease", str(LEASE_S), env={**env, **by_env}),
                start_serve(root / "home-c", *args, env=env),
            )
            try:
                yield Pair(a, b, upstream, tk, doomed)
            finally:
                await asyncio.gather(a.stop(), b.stop(), doomed.stop())


async def read_all(client: httpx.AsyncClient, url: str, **headers: str) -> bytes:
    response = await client.get(url, headers=headers)
    assert response.status_code == 200, response.text
    return response.content


async def first_text(client: httpx.AsyncClient, url: str) -> list[Event]:
    """The turn's events up to its first text; then the connection is dropped."""
    head: list[Event] = []
    async with client.stream("GET", url) as response:
        async for event in events_of(response):
            head.append(event)
            if event.type == "text":
                break
    return head


def text_of(events: list[Event]) -> str:
    return "".join(e.data["text"] for e in events if e.type == "text")


async def last_message(client: httpx.AsyncClient, chat: str) -> dict[str, Any]:
    page = (await client.get(f"/chats/{chat}/messages", params={"limit": 1})).json()
    item: dict[str, Any] = page["items"][0]
    return item


async def test_both_processes_say_what_they_share(pair: Pair) -> None:
    for served in (pair.a, pair.b):
        assert served.banner.endswith("(one local user, no login, PostgreSQL, Redis)")


async def test_a_turn_started_through_a_resumes_through_b_byte_for_byte(pair: Pair) -> None:
    words = "one two three four five six seven eight nine ten."
    pair.upstream.script(Reply(text=words, chunks=[w + " " for w in words.split()], pace=0.03))
    chat = await pair.new_chat()
    async with pair.a.client() as a, pair.b.client() as b:
        started = await a.post(f"/chats/{chat}/turns", json={"text": "Hello"})
        assert started.status_code == 202, started.text
        url = started.json()["events"]
        head = await first_text(a, url)  # A's client drops mid-reply
        rest = await read_all(b, url, **{"Last-Event-ID": str(head[-1].id)})
        whole_b, whole_a = await read_all(b, url), await read_all(a, url)
        stored = await last_message(b, chat)
    assert b"".join(e.raw for e in head) + rest == whole_b == whole_a
    events = parse_events(whole_b)
    assert events[-1].type == "done" and events[-1].data["status"] == "completed"
    assert text_of(events) == words + " " == stored["data"]["mes"]


async def test_two_sends_at_once_through_a_and_b_give_one_generation_and_one_409(
    pair: Pair,
) -> None:
    pair.hang("Wait. only one of you gets this")
    chat = await pair.new_chat()
    before = len(pair.upstream.requests)
    async with pair.a.client() as a, pair.b.client() as b:
        answers = await asyncio.gather(
            a.post(f"/chats/{chat}/turns", json={"text": "from A"}),
            b.post(f"/chats/{chat}/turns", json={"text": "from B"}),
        )
        assert sorted(r.status_code for r in answers) == [202, 409], [r.text for r in answers]
        busy = next(r for r in answers if r.status_code == 409)
        assert busy.json()["error"]["type"] == "ChatBusy"
        winner = next(r for r in answers if r.status_code == 202).json()
        await asyncio.wait_for(pair.upstream.hanging.wait(), 20)
        pair.upstream.release.set()
        events = parse_events(await read_all(b, winner["events"]))
        messages = (await b.get(f"/chats/{chat}/messages", params={"limit": 10})).json()
    assert events[-1].data["status"] == "completed"
    assert len(pair.upstream.requests) - before == 1
    # one user message and one reply: the refused send stored nothing
    user_texts = [m["data"]["mes"] for m in messages["items"] if m["data"].get("is_user")]
    assert len(user_texts) == 1 and user_texts[0] in {"from A", "from B"}


async def test_a_429_seen_through_a_benches_the_key_for_b(pair: Pair) -> None:
    pair.upstream.script(
        Reply(status=429, error={"error": {"message": "slow down"}}, headers={"retry-after": "60"}),
        Reply(text="Fine, the second key."),
    )
    chat = await pair.new_chat()
    before = len(pair.upstream.requests)
    async with pair.a.client() as a, pair.b.client() as b:
        first = (await a.post(f"/chats/{chat}/turns", json={"text": "one"})).json()
        assert parse_events(await read_all(a, first["events"]))[-1].data["status"] == "completed"
        second = (await b.post(f"/chats/{chat}/turns", json={"text": "two"})).json()
        assert parse_events(await read_all(b, second["events"]))[-1].data["status"] == "completed"
    keys = [r.headers["authorization"] for r in pair.upstream.requests[before:]]
    # A: the first key is refused, the second answers; B skips the benched first key
    assert keys == [f"Bearer {KEY_ONE}", f"Bearer {KEY_TWO}", f"Bearer {KEY_TWO}"]


async def test_a_stop_through_b_reaches_the_turn_a_runs(pair: Pair) -> None:
    pair.hang("Wait. the rest never comes")
    chat = await pair.new_chat()
    async with pair.a.client() as a, pair.b.client() as b:
        started = (await a.post(f"/chats/{chat}/turns", json={"text": "Hello"})).json()
        await first_text(b, started["events"])
        stopped = await b.delete(f"/chats/{chat}/turns/{started['turn_id']}")
        assert stopped.status_code == 200 and stopped.json() == {"stopped": True}
        # answered once A stored what it showed: the log is closed, the reply stored
        events = parse_events(await read_all(b, started["events"]))
        stored = await last_message(b, chat)
        assert (await b.delete(f"/chats/{chat}/turns/{started['turn_id']}")).json() == {
            "stopped": False
        }
        # an interrupting send through B stops A's next turn and runs in its place
        pair.hang("Wait. interrupted too")
        again = (await a.post(f"/chats/{chat}/turns", json={"text": "More"})).json()
        await first_text(b, again["events"])
        pair.upstream.script(Reply(text="The interrupting reply."))
        took = await b.post(f"/chats/{chat}/turns", json={"text": "Now", "interrupt": True})
        assert took.status_code == 202, took.text
        interrupted = parse_events(await read_all(a, again["events"]))
        done = parse_events(await read_all(a, took.json()["events"]))
    assert events[-1].data["status"] == "aborted"
    # what was shown (the first piece, as it arrived) is what is stored
    assert text_of(events) == stored["data"]["mes"]
    assert text_of(events).startswith("Wait.")
    assert interrupted[-1].data["status"] == "aborted"
    assert text_of(done) == "The interrupting reply."


async def test_killing_a_mid_turn_leaves_the_partial_reply_and_frees_the_chat(
    pair: Pair,
) -> None:
    doomed = pair.doomed
    pair.hang("Wait. the process dies before this")
    chat = await pair.new_chat()
    async with doomed.client() as c, pair.b.client() as b:
        started = (await c.post(f"/chats/{chat}/turns", json={"text": "Hello"})).json()
        await first_text(b, started["events"])
        deadline = time.monotonic() + 10
        while not str((await last_message(b, chat))["data"].get("mes")).startswith("Wait."):
            assert time.monotonic() < deadline, "the shown text was never stored"
            await asyncio.sleep(0.05)
        await doomed.kill()
        killed_at = time.monotonic()
        busy = await b.post(f"/chats/{chat}/turns", json={"text": "anyone?"})
        assert busy.status_code == 409  # the dead process's lease still runs
        pair.upstream.script(Reply(text="Back again."))
        while True:
            retry = await b.post(f"/chats/{chat}/turns", json={"text": "anyone?"})
            if retry.status_code == 202:
                break
            assert retry.status_code == 409, retry.text
            assert time.monotonic() - killed_at < LEASE_S + 5, "the lock outlived its lease"
            await asyncio.sleep(0.1)
        done = parse_events(await read_all(b, retry.json()["events"]))
        page = (await b.get(f"/chats/{chat}/messages", params={"limit": 4})).json()
    assert done[-1].data["status"] == "completed"
    newest_first = page["items"]
    assert newest_first[0]["data"]["mes"] == "Back again."
    partial = newest_first[2]  # the dead turn's reply, before the new user message
    assert partial["data"]["mes"].strip() == "Wait." and partial["partial_swipes"] == [0]
