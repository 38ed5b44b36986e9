"""The server half of ``benchmarks/scale.py``: chat turns through real ``tavernkit serve``
processes against a scripted upstream on loopback.

Three set-ups, one after another, each serving the same load: one process on SQLite (the
default), one on PostgreSQL + Redis, two on PostgreSQL + Redis (the clients alternate between
them). ``clients`` concurrent clients each run turns on their own chat (``POST
/chats/{id}/turns``, then read its events to ``done``) for ``seconds``. Each reply is
``chunks`` pieces ``pace`` seconds apart from the scripted upstream.

Printed per set-up: turns per second, p50/p99 of a turn (POST sent to ``done`` read) and
p99 added latency (a turn's p99 minus the p50 of the same reply read straight from the
upstream, measured in this run); then the ratios 2 processes ÷ 1 (PostgreSQL) and
PostgreSQL ÷ SQLite (one process). Bounded: a set-up stops at ``seconds`` plus a deadline,
and every process is stopped at the end.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx
import redis.asyncio

from chat.conftest import stock_world  # type: ignore[import-not-found]
from generation._scripted_server import Reply, ScriptedServer  # type: ignore[import-not-found]
from server._processes import ServeProcess, start_serve  # type: ignore[import-not-found]
from tavernkit.facade import Tavern

__all__ = ["run_turns"]


@dataclass
class Figures:
    label: str
    turns: int
    failed: int
    elapsed_s: float
    latencies_ms: list[float]

    @property
    def per_second(self) -> float:
        return self.turns / self.elapsed_s if self.elapsed_s else 0.0

    def p(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[max(0, int(len(ordered) * q) - 1)] if ordered else float("nan")


async def _direct_ms(upstream: ScriptedServer, runs: int) -> list[float]:
    """The reply read straight from the upstream (the baseline a turn adds to)."""
    out = []
    body = {"model": "m1", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient(base_url=upstream.base_url, timeout=30) as client:
        for _ in range(runs):
            start = time.perf_counter()
            async with client.stream("POST", "/v1/chat/completions", json=body) as response:
                async for _ in response.aiter_bytes():
                    pass
            out.append((time.perf_counter() - start) * 1000)
    return out


async def _one_turn(client: httpx.AsyncClient, chat: str) -> float | None:
    start = time.perf_counter()
    started = await client.post(f"/chats/{chat}/turns", json={"text": "Hello"})
    if started.status_code != 202:
        return None
    done, status = False, None
    # to the stream's end, not just ``done``: the chat is free once the log is closed
    async with client.stream("GET", started.json()["events"]) as response:
        async for line in response.aiter_lines():
            if line == "event: done":
                done = True
            elif done and status is None and line.startswith("data: "):
                status = json.loads(line[6:]).get("status")
    return (time.perf_counter() - start) * 1000 if status == "completed" else None


async def _load(
    label: str, servers: list[ServeProcess], chats: list[str], seconds: float, deadline_s: float
) -> Figures:
    latencies: list[float] = []
    failed = 0
    stop_at = time.perf_counter() + seconds

    async def client_loop(n: int, chat: str) -> None:
        nonlocal failed
        server = servers[n % len(servers)]
        async with server.client() as client:
            while time.perf_counter() < stop_at:
                took = await _one_turn(client, chat)
                if took is None:
                    failed += 1
                else:
                    latencies.append(took)

    start = time.perf_counter()
    tasks = [asyncio.create_task(client_loop(n, chat)) for n, chat in enumerate(chats)]
    _, pending = await asyncio.wait(tasks, timeout=seconds + deadline_s)
    for task in pending:
        task.cancel()
    elapsed = time.perf_counter() - start
    return Figures(label, len(latencies), failed + len(pending), elapsed, latencies)


async def _chats(tk: Tavern, base_url: str, count: int) -> list[str]:
    await stock_world(tk, base_url)
    return [(await tk.chats.new_chat("Mira")).id for _ in range(count)]


async def run_turns(
    database: str,
    redis_url: str,
    folder: Path,
    *,
    clients: int,
    seconds: float,
    chunks: int,
    pace: float,
    deadline_s: float = 30.0,
) -> None:
    text = " ".join(f"w{i}" for i in range(chunks))
    rate = ("--turn-rate", "1000000")
    shared = ("--database", database, "--redis", redis_url, *rate)
    results: list[Figures] = []
    async with ScriptedServer([Reply(text=text, pace=pace)]) as upstream:
        direct = statistics.median(await _direct_ms(upstream, 20))
        # one process on the home's SQLite file
        async with Tavern(folder / "sqlite-home") as tk:
            chats = await _chats(tk, upstream.base_url, clients)
        alone = await start_serve(folder / "sqlite-home", *rate, env={})
        try:
            results.append(await _load("1 process, SQLite", [alone], chats, seconds, deadline_s))
        finally:
            await alone.stop()
        # one, then two processes on PostgreSQL + Redis
        async with Tavern(folder / "pg-setup", database=database) as tk:
            chats = await _chats(tk, upstream.base_url, clients)
        env = {"TAVERNKIT_KEY_DIR": str(folder / "keys")}
        pair = await asyncio.gather(
            *(start_serve(folder / f"pg-{n}", *shared, env=env) for n in "ab")
        )
        try:
            for label, servers in (("1 process, PostgreSQL", pair[:1]), ("2 processes", pair)):
                flush = redis.asyncio.Redis.from_url(redis_url)
                await flush.flushall()  # no rate-limit or lock state carries over
                await flush.aclose()
                results.append(await _load(label, list(servers), chats, seconds, deadline_s))
        finally:
            await asyncio.gather(*(s.stop() for s in pair))
    shape = f"{clients} clients x {seconds:.0f} s, replies of {chunks} pieces {pace} s apart"
    print(f"\nturns: {shape}")
    print(f"  direct from the upstream: p50 {direct:7.1f} ms")
    for f in results:
        print(
            f"  {f.label:22} {f.per_second:6.1f} turns/s  p50 {f.p(0.5):7.1f} ms  "
            f"p99 {f.p(0.99):7.1f} ms  p99 added {f.p(0.99) - direct:7.1f} ms  "
            f"({f.turns} turns, {f.failed} failed)"
        )
    sqlite, pg, two = results
    print("ratios (this run):")
    print(f"  2 processes ÷ 1 (PostgreSQL) turns/s: {two.per_second / pg.per_second:5.2f}x")
    print(f"  2 processes ÷ 1 (PostgreSQL) p99 added: {_added(two, direct, pg):5.2f}x")
    print(f"  PostgreSQL ÷ SQLite (1 process) turns/s: {pg.per_second / sqlite.per_second:5.2f}x")
    print(f"  PostgreSQL ÷ SQLite (1 process) p99 added: {_added(pg, direct, sqlite):5.2f}x")


def _added(over: Figures, direct: float, base: Figures) -> float:
    below = base.p(0.99) - direct
    return (over.p(0.99) - direct) / below if below > 0 else float("nan")
