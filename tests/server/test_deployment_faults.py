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
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx
import pytest
import pytest_asyncio

from _services import PostgresCluster, missing
from chat._server import HangingServer, HangReply, Reply
from chat.conftest import stock_world
from tavernkit.facade import Tavern

from ._processes import ServeProcess, start_serve
from ._sse import Event, events_of

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

    async def serve(self, name: str, *args: str, redis_url: str | None = None) -> ServeProcess:
        return await start_serve(
            self.root / name,
            "--database",
            self.database,
            "--redis",
            redis_url or self.redis.url,
            "--lock-lease",
            "3",
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
    assert all(e.type == "done" and e.data["status"] == "completed" for e in finals), finals
    assert all("".join(e.data["text"] for e in s if e.type == "text") == words for s in streams)
