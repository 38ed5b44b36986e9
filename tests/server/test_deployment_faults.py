"""A deployment that holds (issue 37): real ``tavernkit serve`` processes on a real PostgreSQL
and a real Redis of their own (so a test may stop, restart or starve them), with a scripted
upstream.

- many streams on a small Redis pool all end with their ``done`` (readers hold no connection);
- Redis or PostgreSQL down: starts and reads answer 503 with ``Retry-After`` and a message that
  names no address; ``/health/live`` stays 200 while ``/health/ready`` says what is down;
- a Redis restart mid-turn: the turn ends with its final events, and a stop through another
  process works afterwards;
- SIGTERM mid-stream with a stalled upstream: the process exits within ``--shutdown-grace``,
  having stored what was shown and ended its streams with a final event.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import pytest_asyncio
import redis.asyncio

from _services import PostgresCluster, missing, start_postgres
from chat._server import HangingServer, HangReply, Reply
from chat.conftest import stock_world
from tavernkit.facade import Tavern

from ._processes import ServeProcess, start_serve
from ._sse import Event, events_of, parse_events

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RestartableRedis:
    """A ``redis-server`` of this module's own on a fixed loopback port (nothing saved), which
    a test stops and starts again, as an operator restarting Redis would."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            missing("redis-server", "apt-get install -y redis-server")
        self.binary = str(binary)
        self.port = _free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="tk-redis-restart-"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        self.proc = subprocess.Popen(
            [*argv, "--appendonly", "no", "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def own_redis() -> Iterator[RestartableRedis]:
    server = RestartableRedis()
    server.start()
    try:
        yield server
    finally:
        server.close()


@dataclass
class Deployment:
    upstream: HangingServer
    tk: Tavern
    database: str
    redis: RestartableRedis
    root: Path
    env: dict[str, str]

    async def new_chat(self) -> str:
        return (await self.tk.chats.new_chat("Mira")).id

    async def serve(
        self, name: str, *args: str, redis_url: str | None = None, lease: str | None = "3"
    ) -> ServeProcess:
        """A process on this deployment; ``lease=None``: the default lock lease."""
        return await start_serve(
            self.root / name,
            "--database",
            self.database,
            "--redis",
            redis_url or self.redis.url,
            *(("--lock-lease", lease) if lease is not None else ()),
            "--turn-rate",
            "10000",
            *args,
            env=self.env,
        )

    def hang(self, text: str) -> None:
        """The next replies stream their first word, then stall until ``upstream.release``."""
        self.upstream.release.set()
        self.upstream.release = asyncio.Event()
        self.upstream.hanging = asyncio.Event()
        self.upstream.script(HangReply(text=text, hang_after=1))


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def deployment(
    postgres_cluster: PostgresCluster,
    own_redis: RestartableRedis,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Deployment]:
    database = await postgres_cluster.create_database()
    root = tmp_path_factory.mktemp("deployment")
    env = {"TAVERNKIT_KEY_DIR": str(root / "keys")}
    try:
        async with HangingServer() as upstream, Tavern(root / "setup", database=database) as tk:
            await stock_world(tk, upstream.base_url)
            yield Deployment(upstream, tk, database, own_redis, root, env)
    finally:
        await postgres_cluster.drop_database(database)


async def stream_of(client: httpx.AsyncClient, chat: str, text: str) -> list[Event]:
    """A turn started with ``Accept: text/event-stream``: its events, read to the end."""
    events: list[Event] = []
    async with client.stream(
        "POST",
        f"/chats/{chat}/turns",
        json={"text": text},
        headers={"accept": "text/event-stream"},
    ) as response:
        assert response.status_code == 200, await response.aread()
        async for event in events_of(response):
            events.append(event)
    return events


async def test_many_streams_on_a_small_redis_pool_all_end_with_done(
    deployment: Deployment,
) -> None:
    """40 streams at once through a process whose Redis pool has 8 connections: each ends with
    its ``done`` (before, each waiting reader held a connection: the pool ran out, and streams
    failed or hung without a final event)."""
    words = "one two three four five six seven eight."
    deployment.upstream.script(Reply(text=words, pace=0.05))
    chats = [await deployment.new_chat() for _ in range(40)]
    served = await deployment.serve(
        "small-pool", redis_url=deployment.redis.url + "?max_connections=8"
    )
    try:
        async with httpx.AsyncClient(base_url=served.url, timeout=60.0) as client:
            streams = await asyncio.wait_for(
                asyncio.gather(*(stream_of(client, c, "Hello") for c in chats)), 90
            )
    finally:
        await served.stop()
    finals = [events[-1] for events in streams]
    bad = [(e.type, e.data) for e in finals if e.type != "done" or e.data["status"] != "completed"]
    assert not bad, bad
    assert all("".join(e.data["text"] for e in s if e.type == "text") == words for s in streams)


def assert_unavailable(response: httpx.Response, *, port: int) -> None:
    """A 503 with Retry-After whose message names no address."""
    assert response.status_code == 503, response.text
    assert int(response.headers["retry-after"]) >= 1
    error = response.json()["error"]
    assert error["type"] in {"CoordinationError", "StoreUnavailable"}
    assert "127.0.0.1" not in response.text and str(port) not in response.text


async def wait_ready(client: httpx.AsyncClient, *, within_s: float = 20) -> None:
    deadline = time.monotonic() + within_s
    while (await client.get("/health/ready")).status_code != 200:
        assert time.monotonic() < deadline, "never ready again"
        await asyncio.sleep(0.1)


async def test_redis_down_answers_503_and_ready_says_so_until_it_is_back(
    deployment: Deployment,
) -> None:
    deployment.upstream.script(Reply(text="Back to work."))
    chat = await deployment.new_chat()
    served = await deployment.serve("redis-down")
    try:
        async with served.client() as client:
            assert (await client.get("/health/ready")).json()["checks"] == {
                "database": "ok",
                "redis": "ok",
            }
            deployment.redis.stop()
            try:
                started = await client.post(f"/chats/{chat}/turns", json={"text": "Hello"})
                assert_unavailable(started, port=deployment.redis.port)
                assert (await client.get("/health/live")).json() == {"status": "ok"}
                ready = await client.get("/health/ready")
                assert ready.status_code == 503 and "retry-after" in ready.headers
                assert ready.json() == {
                    "status": "unavailable",
                    "checks": {"database": "ok", "redis": "unavailable"},
                }
            finally:
                deployment.redis.start()
            await wait_ready(client)
            events = await stream_of(client, chat, "Hello again")
    finally:
        await served.stop()
    assert events[-1].type == "done" and events[-1].data["status"] == "completed"


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[PostgresCluster]:
    """A cluster of this module's own, which a test stops and starts again."""
    with start_postgres() as cluster:
        yield cluster


async def test_postgres_down_answers_503_and_ready_says_so_until_it_is_back(
    deployment: Deployment, own_postgres: PostgresCluster, tmp_path: Path
) -> None:
    database = await own_postgres.create_database()
    served = await start_serve(
        tmp_path / "home",
        "--database",
        database,
        "--redis",
        deployment.redis.url,
        env={"TAVERNKIT_KEY_DIR": str(tmp_path / "keys")},
    )
    try:
        async with served.client() as client:
            assert (await client.get("/chats")).status_code == 200
            own_postgres.stop_server()
            try:
                for path in ("/chats", "/characters", "/health"):
                    assert_unavailable(await client.get(path), port=own_postgres.port)
                assert (await client.get("/health/live")).status_code == 200
                ready = await client.get("/health/ready")
                assert ready.status_code == 503
                assert ready.json()["checks"] == {"database": "unavailable", "redis": "ok"}
            finally:
                own_postgres.start_server()
            await wait_ready(client)
            assert (await client.get("/chats")).status_code == 200
    finally:
        await served.stop()


async def test_a_redis_restart_mid_turn_the_turn_ends_and_a_stop_works_afterwards(
    deployment: Deployment,
) -> None:
    """Redis restarts (its data lost) while A runs a turn that B's client watches: the turn
    still ends, B's client reads its last pieces and ``done``, and the reply is stored whole;
    afterwards a stop through B reaches A's next turn (A subscribed again)."""
    a, b = await asyncio.gather(deployment.serve("restart-a"), deployment.serve("restart-b"))
    try:
        async with a.client() as ca, b.client() as cb:
            deployment.hang("Wait. for the rest of it")
            chat = await deployment.new_chat()
            started = (await ca.post(f"/chats/{chat}/turns", json={"text": "Hello"})).json()
            seen: list[Event] = []
            first = asyncio.Event()

            async def watch() -> None:
                async with cb.stream("GET", started["events"]) as response:
                    async for event in events_of(response):
                        seen.append(event)
                        if event.type == "text":
                            first.set()

            watcher = asyncio.create_task(watch())
            await asyncio.wait_for(first.wait(), 20)
            deployment.redis.stop()
            await asyncio.sleep(1.0)
            deployment.redis.start()
            deployment.upstream.release.set()
            await asyncio.wait_for(watcher, 30)
            stored = (await cb.get(f"/chats/{chat}/messages", params={"limit": 1})).json()
            assert seen[-1].type == "done" and seen[-1].data["status"] == "completed", seen
            text = "".join(e.data["text"] for e in seen if e.type == "text")
            assert text == stored["items"][0]["data"]["mes"] == "Wait. for the rest of it"

            deployment.hang("Wait. stopped after the restart")
            again = (await ca.post(f"/chats/{chat}/turns", json={"text": "More"})).json()
            await asyncio.wait_for(deployment.upstream.hanging.wait(), 20)
            before = time.monotonic()
            stopped = await cb.delete(f"/chats/{chat}/turns/{again['turn_id']}")
            assert stopped.status_code == 200 and stopped.json() == {"stopped": True}
            assert time.monotonic() - before < 5
            events = parse_events((await cb.get(again["events"])).content)
    finally:
        await asyncio.gather(a.stop(), b.stop())
    assert events[-1].type == "done" and events[-1].data["status"] == "aborted"


async def test_a_redis_blip_while_pieces_stream_loses_no_piece(deployment: Deployment) -> None:
    """Redis gone for 2 s (longer than a third of the lock's lease) while a reply streams: the
    turn buffers the pieces it cannot append and writes them once Redis is back, keeps its
    chat, and its watcher reads every piece in order, then ``done``."""
    # sentences: the turn shows a sentence's words together
    words = [f"Piece {i}. " for i in range(40)]
    deployment.upstream.script(Reply(text="".join(words), chunks=words, pace=0.1))
    chat = await deployment.new_chat()
    served = await deployment.serve("blip")
    try:
        async with served.client() as client:
            seen: list[Event] = []
            texts = asyncio.Event()

            async def watch() -> None:
                async for event in _stream_events(client, chat, "Hello"):
                    seen.append(event)
                    if sum(e.type == "text" for e in seen) == 5:
                        texts.set()

            watcher = asyncio.create_task(watch())
            await asyncio.wait_for(texts.wait(), 20)
            deployment.redis.stop()
            await asyncio.sleep(2.0)
            deployment.redis.start()
            await asyncio.wait_for(watcher, 40)
            stored = (await client.get(f"/chats/{chat}/messages", params={"limit": 1})).json()
    finally:
        await served.stop()
    assert seen[-1].type == "done" and seen[-1].data["status"] == "completed", seen[-3:]
    text = "".join(e.data["text"] for e in seen if e.type == "text")
    assert text == "".join(words) == stored["items"][0]["data"]["mes"]


async def _stream_events(client: httpx.AsyncClient, chat: str, text: str) -> AsyncIterator[Event]:
    async with client.stream(
        "POST",
        f"/chats/{chat}/turns",
        json={"text": text},
        headers={"accept": "text/event-stream"},
    ) as response:
        assert response.status_code == 200, await response.aread()
        async for event in events_of(response):
            yield event


async def test_sigterm_mid_stream_with_a_stalled_upstream_exits_within_the_grace(
    deployment: Deployment,
) -> None:
    """SIGTERM to A while its turn waits on a stalled upstream, watched through A and through
    B: A exits within its grace (2 s, from ``TAVERNKIT_SHUTDOWN_GRACE``) and a few seconds,
    the shown text stored and marked partial, and both watchers' streams end with the turn's
    ``done`` (aborted). Before, A waited for the turn to end: forever, with this upstream."""
    grace = 2.0
    saved = dict(deployment.env)
    deployment.env["TAVERNKIT_SHUTDOWN_GRACE"] = str(grace)
    try:
        a = await deployment.serve("term-a")
    finally:
        deployment.env.clear()
        deployment.env.update(saved)
    b = await deployment.serve("term-b")
    deployment.hang("Wait. the rest never comes")
    chat = await deployment.new_chat()
    try:
        async with a.client() as ca, b.client() as cb:
            through_a: list[Event] = []
            shown = asyncio.Event()

            async def watch_a() -> None:
                async for event in _stream_events(ca, chat, "Hello"):
                    through_a.append(event)
                    if event.type == "text":
                        shown.set()

            watcher_a = asyncio.create_task(watch_a())
            await asyncio.wait_for(shown.wait(), 20)
            turn = through_a[0].data["turn"]
            url = f"/chats/{chat}/turns/{turn}/events"
            through_b: list[Event] = []
            joined = asyncio.Event()

            async def watch_b() -> None:
                async with cb.stream("GET", url) as response:
                    async for event in events_of(response):
                        through_b.append(event)
                        if event.type == "text":
                            joined.set()

            watcher_b = asyncio.create_task(watch_b())
            await asyncio.wait_for(joined.wait(), 20)
            a.proc.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            await asyncio.wait_for(a.proc.wait(), grace + 15)
            took = time.monotonic() - sent
            await asyncio.wait_for(asyncio.gather(watcher_a, watcher_b), 10)
            stored = await last_message(cb, chat)
    finally:
        deployment.upstream.release.set()
        await asyncio.gather(a.stop(), b.stop())
    assert took < grace + 6, took
    for events in (through_a, through_b):
        assert events[-1].type == "done" and events[-1].data["status"] == "aborted", events[-2:]
    assert stored["data"]["mes"].strip() == "Wait." and stored["partial_swipes"] == [0]


async def last_message(client: httpx.AsyncClient, chat: str) -> dict[str, Any]:
    page = (await client.get(f"/chats/{chat}/messages", params={"limit": 1})).json()
    item: dict[str, Any] = page["items"][0]
    return item


async def redis_command_calls(url: str) -> dict[str, int]:
    """Calls per command since the server's stats were last reset (``INFO commandstats``)."""
    client = redis.asyncio.Redis.from_url(url)
    try:
        stats = await client.info("commandstats")
    finally:
        await client.aclose()
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


async def reset_redis_stats(url: str) -> None:
    client = redis.asyncio.Redis.from_url(url)
    try:
        await client.config_resetstat()
    finally:
        await client.aclose()


async def test_a_turns_pieces_reach_redis_batched_and_readers_see_every_byte(
    deployment: Deployment,
) -> None:
    """A 40-piece reply (pieces 5 ms apart) through a process on PostgreSQL + Redis: the turn
    writes its pieces in a few batches (before: one ``XADD`` per piece, 40 and more), and its
    stream still carries every byte in order and ends with ``done``."""
    words = [f"Piece {i}. " for i in range(40)]
    deployment.upstream.script(Reply(text="".join(words), chunks=words, pace=0.005))
    chat = await deployment.new_chat()
    served = await deployment.serve("batched")
    try:
        async with served.client() as client:
            await wait_ready(client)
            await reset_redis_stats(deployment.redis.url)
            events = await stream_of(client, chat, "Hello")
            calls = await redis_command_calls(deployment.redis.url)
    finally:
        await served.stop()
    assert events[-1].type == "done" and events[-1].data["status"] == "completed"
    assert "".join(e.data["text"] for e in events if e.type == "text") == "".join(words)
    # the turn's own writes (the readers' wake-ups add a few XADDs to another stream)
    assert calls.get("xadd", 0) <= 20, calls


async def test_a_process_killed_mid_turn_frees_its_chat_within_10_s_and_its_watcher_learns_it(
    deployment: Deployment,
) -> None:
    """``kill -9`` of A mid-turn (default lock lease) while B's client watches the turn: the
    chat takes a new turn through B within ~10 s, B's watcher gets a final ``error``
    (``TurnOrphaned``) and a failed ``done`` within ~15 s, and the dead turn's log expires
    within minutes, not a day (before: the chat stayed locked 30 s, the watcher saw pings for
    ~90 s, and an unwatched orphan's log stayed 24 h)."""
    a, b = await asyncio.gather(
        deployment.serve("killed-a", lease=None), deployment.serve("killed-b", lease=None)
    )
    try:
        async with a.client() as ca, b.client() as cb:
            deployment.hang("Wait. the process dies before this")
            chat = await deployment.new_chat()
            started = (await ca.post(f"/chats/{chat}/turns", json={"text": "Hello"})).json()
            seen: list[Event] = []
            first = asyncio.Event()
            ended_at: list[float] = []

            async def watch() -> None:
                async with cb.stream("GET", started["events"]) as response:
                    async for event in events_of(response):
                        seen.append(event)
                        if event.type == "text":
                            first.set()
                ended_at.append(time.monotonic())

            watcher = asyncio.create_task(watch())
            await asyncio.wait_for(first.wait(), 20)
            await a.kill()
            killed_at = time.monotonic()
            log_ttl_ms = await redis_pttl(deployment.redis.url, f"tk:turn:{started['turn_id']}")
            deployment.upstream.script(Reply(text="Back again."))
            while True:
                retry = await cb.post(f"/chats/{chat}/turns", json={"text": "anyone?"})
                if retry.status_code == 202:
                    freed_s = time.monotonic() - killed_at
                    break
                assert retry.status_code == 409, retry.text
                assert time.monotonic() - killed_at < 15, "the chat stayed locked"
                await asyncio.sleep(0.2)
            await asyncio.wait_for(watcher, 25)
            learned_s = ended_at[0] - killed_at
            after = parse_events(await read_to_end(cb, retry.json()["events"]))
    finally:
        deployment.upstream.release.set()
        await asyncio.gather(a.stop(), b.stop())
    assert freed_s < 11, freed_s
    assert [e.type for e in seen[-2:]] == ["error", "done"], seen[-3:]
    assert seen[-2].data["class"] == "TurnOrphaned" and seen[-1].data["status"] == "failed"
    assert learned_s < 16, learned_s
    assert 0 < log_ttl_ms <= 600_000, log_ttl_ms
    assert after[-1].type == "done" and after[-1].data["status"] == "completed"


async def redis_pttl(url: str, key: str) -> int:
    client = redis.asyncio.Redis.from_url(url)
    try:
        return int(await client.pttl(key))
    finally:
        await client.aclose()


async def read_to_end(client: httpx.AsyncClient, url: str) -> bytes:
    async with client.stream("GET", url) as response:
        return await response.aread()


async def test_a_postgres_restart_mid_turn_ends_the_turn_and_the_chat_stays_whole(
    deployment: Deployment, own_postgres: PostgresCluster, tmp_path: Path
) -> None:
    """PostgreSQL restarts (``pg_ctl stop -m fast``, 6 s down: longer than the store's own
    3 s of connection retries) while A's turn streams, and the reply ends while it is down:
    the turn waits for the database, completes, and stores exactly what its stream showed;
    the user's message is stored once, and A serves the chat's next turn. Before, the first
    streaming write that met the outage failed the turn (with two ``error`` events)."""
    database = await own_postgres.create_database()
    async with Tavern(tmp_path / "setup", database=database) as tk:
        await stock_world(tk, deployment.upstream.base_url)
        chat = (await tk.chats.new_chat("Mira")).id
    served = await start_serve(
        tmp_path / "home",
        "--database",
        database,
        "--redis",
        deployment.redis.url,
        "--turn-rate",
        "10000",
        env={"TAVERNKIT_KEY_DIR": str(tmp_path / "keys")},
    )
    try:
        async with served.client() as client:
            deployment.hang("Wait. the database restarts under this")
            seen: list[Event] = []
            shown = asyncio.Event()

            async def watch() -> None:
                async for event in _stream_events(client, chat, "Before the restart"):
                    seen.append(event)
                    if event.type == "text":
                        shown.set()

            watcher = asyncio.create_task(watch())
            await asyncio.wait_for(shown.wait(), 20)
            # the reply's place is stored (its first piece with it): the restart hits the
            # streaming writes and the turn's last write, not the place's insert
            deadline = time.monotonic() + 10
            while not (await last_message(client, chat))["data"]["mes"].startswith("Wait."):
                assert time.monotonic() < deadline, "the shown text was never stored"
                await asyncio.sleep(0.05)
            own_postgres.stop_server()
            try:
                deployment.upstream.release.set()
                await asyncio.sleep(6.0)
            finally:
                own_postgres.start_server()
            await asyncio.wait_for(watcher, 60)
            await wait_ready(client, within_s=30)
            deployment.upstream.script(Reply(text="After the restart."))
            after = await stream_of(client, chat, "After the restart")
            page = (await client.get(f"/chats/{chat}/messages", params={"limit": 50})).json()
    finally:
        deployment.upstream.release.set()
        await served.stop()
    assert [e.type for e in seen].count("error") == 0, seen
    assert seen[-1].type == "done" and seen[-1].data["status"] == "completed", seen[-3:]
    shown = "".join(e.data["text"] for e in seen if e.type == "text")
    assert after[-1].type == "done" and after[-1].data["status"] == "completed", after[-3:]
    texts = [item["data"]["mes"] for item in reversed(page["items"])]
    assert texts[-4:] == [
        "Before the restart",
        shown,
        "After the restart",
        "After the restart.",
    ], texts
    assert shown == "Wait. the database restarts under this"


async def test_a_409_does_not_count_against_the_turn_rate(deployment: Deployment) -> None:
    """With two turns a minute, a turn holding the chat and three sends refused with 409
    meanwhile: the next send once the chat is free still starts (before, every 409 counted,
    and the second of them was already a 429)."""
    # a Redis database of its own: the other tests' turns counted on the shared one
    own_db = deployment.redis.url.rpartition("/")[0] + "/5"
    served = await deployment.serve("rate", "--turn-rate", "2", redis_url=own_db)
    chat = await deployment.new_chat()
    try:
        async with served.client() as client:
            deployment.hang("Wait. a while")
            first = await client.post(f"/chats/{chat}/turns", json={"text": "Hello"})
            assert first.status_code == 202, first.text
            await asyncio.wait_for(deployment.upstream.hanging.wait(), 20)
            refused = [
                (await client.post(f"/chats/{chat}/turns", json={"text": "again"})).status_code
                for _ in range(3)
            ]
            deployment.upstream.release.set()
            await read_to_end(client, first.json()["events"])
            deployment.upstream.script(Reply(text="Now."))
            second = await client.post(f"/chats/{chat}/turns", json={"text": "Now"})
            if second.status_code == 202:
                await read_to_end(client, second.json()["events"])
            third = await client.post(f"/chats/{chat}/turns", json={"text": "Once more"})
    finally:
        await served.stop()
    assert refused == [409, 409, 409]
    assert second.status_code == 202, second.text
    assert third.status_code == 429  # the rate still holds: two turns started
