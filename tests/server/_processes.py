"""Real ``tavernkit serve`` processes (``--port 0``), started and awaited from a test's event
loop: what the several-processes tests and their deployment share."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx
import redis.asyncio

from _services import PostgresCluster, RedisServer

__all__ = ["ServeProcess", "shared_database", "start_serve"]

_RUN = "from tavernkit.cli import main; main()"
#: the served process imports this tree's tavernkit (not whatever the venv's install points at)
_SRC = str(Path(__file__).resolve().parents[2] / "src")


@dataclass
class ServeProcess:
    proc: asyncio.subprocess.Process
    url: str
    #: the line it printed when it started
    banner: str

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=20.0)

    async def stop(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 20)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()

    async def kill(self) -> None:
        """SIGKILL: the process ends at once, writing, releasing and closing nothing."""
        self.proc.kill()
        await self.proc.wait()


async def start_serve(home: Path, *args: str, env: dict[str, str]) -> ServeProcess:
    """``tavernkit serve --port 0 --home HOME ARGS``, once it answers ``/health``."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _RUN,
        "serve",
        "--port",
        "0",
        "--home",
        str(home),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": _SRC, **env},
    )
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
    if not line.startswith("tavernkit serving http://"):
        proc.kill()
        await proc.wait()
        raise AssertionError(f"tavernkit serve did not start: {line!r}")
    served = ServeProcess(proc, line.split()[2], line.strip())
    deadline = time.monotonic() + 60
    async with served.client() as client:
        while True:
            try:
                if (await client.get("/health")).status_code == 200:
                    return served
            except httpx.TransportError:
                pass
            if proc.returncode is not None or time.monotonic() > deadline:
                await served.stop()
                raise AssertionError(f"tavernkit serve at {served.url} never answered /health")
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def shared_database(
    postgres_cluster: PostgresCluster, redis_server: RedisServer
) -> AsyncIterator[str]:
    """A fresh database on the test cluster (dropped afterwards) and the Redis emptied: what a
    module's several processes share."""
    database = await postgres_cluster.create_database()
    flush = redis.asyncio.Redis.from_url(redis_server.url)
    try:
        await flush.flushall()
    finally:
        await flush.aclose()
    try:
        yield database
    finally:
        await postgres_cluster.drop_database(database)
