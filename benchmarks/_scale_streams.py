"""The load half of ``benchmarks/scale.py --part streams``: many turn streams at once through
two real ``tavernkit serve`` processes on PostgreSQL + Redis, with their default pools.

``streams`` turns start together, each on a chat of its own, half through each process, each
asked with ``Accept: text/event-stream`` (the turn's events answer the POST). Each reply is
``chunks`` sentences ``pace`` seconds apart from a scripted upstream on loopback.

Printed: how many streams started (HTTP 200), completed (their last event a ``done`` with
status ``completed``), ended with any final event (``done`` or ``error``) and hung (no final
event within the deadline); the p50/p99 time to the first piece; and the p99 added per-piece
latency: for each piece after the first, how much later than the upstream's pace it arrived,
relative to the stream's first piece (0 when the server keeps up; a piece is found by its
text, ``Piece N.``, since one event may carry several).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx2 as httpx

from chat.conftest import stock_world  # type: ignore[import-not-found]
from generation._scripted_server import Reply, ScriptedServer  # type: ignore[import-not-found]
from server._processes import start_serve  # type: ignore[import-not-found]
from tavernkit.facade import Tavern

__all__ = ["run_streams"]


@dataclass
class Stream:
    status: int = 0
    last: str | None = None
    last_status: str | None = None
    #: the ``error`` event's class and code, when one came
    error: str | None = None
    first_piece_s: float | None = None
    lateness_s: list[float] = field(default_factory=list)


async def _one(client: httpx.AsyncClient, chat: str, pace: float) -> Stream:
    out = Stream()
    start = time.perf_counter()
    first: float | None = None
    pieces = 0
    event = None
    async with client.stream(
        "POST",
        f"/chats/{chat}/turns",
        json={"text": "Hello"},
        headers={"accept": "text/event-stream"},
    ) as response:
        out.status = response.status_code
        if response.status_code != 200:
            return out
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event is not None:
                now = time.perf_counter()
                if event == "text":
                    if first is None:
                        first = now
                        out.first_piece_s = now - start
                    # one event may carry several pieces (a turn's pieces reach Redis in
                    # batches): each is late by its own place in the reply
                    for _ in range(json.loads(line[6:])["text"].count("Piece ")):
                        if pieces:
                            out.lateness_s.append(max(0.0, (now - first) - pieces * pace))
                        pieces += 1
                elif event in ("done", "error"):
                    out.last = event
                    data = json.loads(line[6:])
                    out.last_status = data.get("status")
                    if event == "error" and out.error is None:
                        out.error = f"{data.get('class')} ({data.get('code')})"
    return out


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(len(ordered) * q) - 1)] if ordered else float("nan")


async def run_streams(
    database: str,
    redis_url: str,
    folder: Path,
    *,
    streams: int,
    chunks: int,
    pace: float,
    deadline_s: float = 240.0,
) -> None:
    # sentences, each its own chunk: the turn shows a sentence's words together
    pieces = [f"Piece {i}. " for i in range(chunks)]
    text = "".join(pieces)
    args = ("--database", database, "--redis", redis_url, "--turn-rate", "1000000")
    env = {"TAVERNKIT_KEY_DIR": str(folder / "keys")}
    async with ScriptedServer([Reply(text=text, chunks=pieces, pace=pace)]) as upstream:
        async with Tavern(folder / "streams-setup", database=database) as tk:
            await stock_world(tk, upstream.base_url)
            chats = [(await tk.chats.new_chat("Mira")).id for _ in range(streams)]
        pair = await asyncio.gather(
            *(start_serve(folder / f"streams-{n}", *args, env=env) for n in "ab")
        )
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        clients = [
            httpx.AsyncClient(base_url=s.url, timeout=deadline_s, limits=limits) for s in pair
        ]
        try:
            start = time.perf_counter()
            tasks = [
                asyncio.create_task(_one(clients[n % 2], chat, pace))
                for n, chat in enumerate(chats)
            ]
            done, pending = await asyncio.wait(tasks, timeout=deadline_s)
            elapsed = time.perf_counter() - start
            for task in pending:
                task.cancel()
        finally:
            for client in clients:
                await client.aclose()
            await asyncio.gather(*(s.stop() for s in pair))
    results = [t.result() for t in done if t.exception() is None]
    broken = sum(1 for t in done if t.exception() is not None)
    started = sum(r.status == 200 for r in results)
    completed = sum(r.last == "done" and r.last_status == "completed" for r in results)
    ended = sum(r.last is not None for r in results)
    refused = sum(r.status not in (0, 200) for r in results)
    firsts = [r.first_piece_s for r in results if r.first_piece_s is not None]
    lateness = [x for r in results for x in r.lateness_s]
    print(f"\nstreams: {streams} at once through 2 processes (PostgreSQL + Redis, default pools)")
    print(f"  replies of {chunks} pieces {pace} s apart; all ended in {elapsed:.1f} s")
    print(
        f"  started {started}, completed {completed}, ended with done/error {ended}, "
        f"refused {refused}, broken {broken}, hung {len(pending)}"
    )
    errors = Counter(r.error for r in results if r.error is not None)
    if errors:
        print("  errors: " + ", ".join(f"{n} {what}" for what, n in errors.most_common()))
    first_p50, first_p99 = _p(firsts, 0.5) * 1000, _p(firsts, 0.99) * 1000
    print(f"  first piece: p50 {first_p50:7.1f} ms  p99 {first_p99:7.1f} ms")
    print(
        f"  added per-piece latency: p50 {_p(lateness, 0.5) * 1000:7.1f} ms  "
        f"p99 {_p(lateness, 0.99) * 1000:7.1f} ms"
    )
