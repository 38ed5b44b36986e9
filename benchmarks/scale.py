"""The store under several processes' data: PostgreSQL against the embedded SQLite, and a long
chat against a short one.

Run: ``.venv/bin/python benchmarks/scale.py [--quick] [--database postgresql://...]
[--redis redis://...] [--part store|turns|streams|load|all]`` (``load``: turns, then
streams: the issue-37 figures in one run, a few minutes).

Without ``--database`` it starts a throwaway PostgreSQL cluster the way the tests do
(tests/_services.py: initdb + pg_ctl on a free loopback port, fsync off) and removes it after;
without ``--redis``, a throwaway ``redis-server``.

**store**: for each backend and each chat length (10, 1,000 and 100,000 messages; 20,000 with
``--quick``) it makes one chat, then times ``--appends`` appends of one message each (what a
turn writes) and as many reads of the turn's window (``load_chat_window(last=160)``, what a
turn reads). Printed: the median and p99 of each, then the ratios, all measured in this run:
long ÷ short per backend (appends: 100,000 ÷ 10; window reads: 100,000 ÷ 1,000, the first
length whose window is full; flat, ~1.0, means the cost does not follow the chat's length) and
PostgreSQL ÷ SQLite (a round trip over loopback TCP per statement against an in-process
library call).

**turns** (``benchmarks/_scale_turns.py``): turns per second, p99 added latency and CPU per
turn (of the tavernkit processes, and with the PostgreSQL and Redis servers added) through
real ``tavernkit serve`` processes against a scripted upstream (replies of ``--chunks``
pieces, 40): 1 process on SQLite, 1 on PostgreSQL + Redis, 2 on PostgreSQL + Redis and 2
on SQLite (a database each: what two processes cost a turn whatever the backend), all
running, warmed up, then measured in ``--rounds`` rounds (16) of ``--seconds`` each (3) in a
rotating order, with the ratios 2 ÷ 1 and PostgreSQL ÷ SQLite (CPU per turn, with one process
and with two, and two PostgreSQL processes ÷ one SQLite: the median of the rounds' ratios;
target ≤ 1.5).

**streams** (``benchmarks/_scale_streams.py``): ``--streams`` turn streams (500) at once
through two processes with their default settings (replies of ``--stream-chunks`` pieces,
20, 50 ms apart): how many completed, how many ended with a final event, the time to the
first piece and the p99 added per-piece latency.

The figures are noisy on a shared machine: say what the load was.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

# after the path setup above: these come from this tree's src/ and tests/
from _scale_streams import run_streams  # type: ignore[import-not-found]  # noqa: E402
from _scale_turns import run_turns  # type: ignore[import-not-found]  # noqa: E402

from _services import start_postgres, start_redis  # type: ignore[import-not-found]  # noqa: E402
from tavernkit.store import PostgresStore, SqliteStore, open_postgres_store  # noqa: E402
from tavernkit.store.sqlite import open_store as open_sqlite_store  # noqa: E402

WINDOW = 160


def _message(i: int) -> dict[str, Any]:
    text = f"message {i}: the ferry leaves at dusk, the lantern swings in the wind"
    if i % 2:
        return {"name": "You", "is_user": True, "mes": text, "extra": {}}
    return {"name": "Mira", "is_user": False, "mes": text, "swipes": [text], "swipe_id": 0}


async def _timed(n: int, call: Callable[[], Awaitable[object]]) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _p99(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.99) - 1)]


async def _measure(store: SqliteStore, length: int, appends: int) -> dict[str, list[float]]:
    chat = await store.create_chat(
        {"chat_metadata": {}}, [_message(i) for i in range(length)], name=f"chat {length}"
    )
    if isinstance(store, PostgresStore):
        # what autovacuum does within a minute of a bulk load (and copy-data does at once)
        await store.refresh_statistics()
    reply = _message(0)
    append = await _timed(appends, lambda: store.append_message(chat.id, reply))
    window = await _timed(appends, lambda: store.load_chat_window(chat.id, last=WINDOW))
    return {"append": append, "window": window}


async def run(url: str, lengths: tuple[int, int, int], appends: int, folder: Path) -> None:
    results: dict[tuple[str, int], dict[str, list[float]]] = {}
    for backend in ("sqlite", "postgres"):
        for length in lengths:
            if backend == "sqlite":
                store = await open_sqlite_store(folder / f"bench-{length}.db")
            else:
                store = await open_postgres_store(url, key_dir=folder / "keys")
            try:
                start = time.perf_counter()
                results[(backend, length)] = await _measure(store, length, appends)
                took = time.perf_counter() - start
            finally:
                await store.close()
            cell = results[(backend, length)]
            print(
                f"{backend:8} {length:>7} msgs  append p50 {statistics.median(cell['append']):6.2f}"
                f" ms p99 {_p99(cell['append']):6.2f} ms   window({WINDOW}) p50 "
                f"{statistics.median(cell['window']):6.2f} ms p99 {_p99(cell['window']):6.2f} ms"
                f"   ({took:.1f} s with the import)"
            )
    short, middle, long = lengths
    print("\nratios (medians, this run):")

    def median(backend: str, length: int, op: str) -> float:
        return statistics.median(results[(backend, length)][op])

    for backend in ("sqlite", "postgres"):
        ratio = median(backend, long, "append") / median(backend, short, "append")
        print(f"  {backend:8} append {long} ÷ {short} messages: {ratio:5.2f}x")
        # a window holds WINDOW messages only once the chat is that long: compare from there
        ratio = median(backend, long, "window") / median(backend, middle, "window")
        print(f"  {backend:8} window {long} ÷ {middle} messages: {ratio:5.2f}x")
    for op in ("append", "window"):
        for length in lengths:
            ratio = median("postgres", length, op) / median("sqlite", length, op)
            print(f"  postgres ÷ sqlite {op:6} at {length:>7} messages: {ratio:5.2f}x")


def _postmaster(data: Path) -> int | None:
    """The pid of the cluster's postmaster (the first line of its ``postmaster.pid``)."""
    try:
        return int((data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 messages, not 100,000")
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--database", help="an empty PostgreSQL database to use")
    parser.add_argument("--redis", help="a Redis to use (it is flushed)")
    parts = ("store", "turns", "streams", "load", "all")
    parser.add_argument("--part", choices=parts, default="all")
    parser.add_argument("--streams", type=int, default=500, help="streams: how many at once")
    parser.add_argument("--clients", type=int, default=8, help="turns: concurrent clients")
    # many short rounds: the host's noise moves a round's CPU by ±15%; across runs the median
    # of 16 paired ratios spread over 0.1 where that of 4 rounds of 8 s spread over 0.3
    parser.add_argument("--seconds", type=float, default=3.0, help="turns: per set-up a round")
    parser.add_argument("--rounds", type=int, default=16, help="turns: rounds of the set-ups")
    parser.add_argument("--chunks", type=int, default=40, help="turns: pieces per reply")
    parser.add_argument("--stream-chunks", type=int, default=20, help="streams: pieces")
    parser.add_argument("--pace", type=float, default=0.005, help="turns: seconds per piece")
    args = parser.parse_args()
    lengths = (10, 1_000, 20_000 if args.quick else 100_000)
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tk-scale-")))
        cluster = None if args.database else stack.enter_context(start_postgres())
        if args.part in ("store", "all"):
            url = args.database or cluster.url()  # type: ignore[union-attr]
            asyncio.run(run(url, lengths, args.appends, folder))
        postmaster = _postmaster(cluster.data) if cluster is not None else None
        if args.part in ("turns", "load", "all"):
            redis_url = args.redis or stack.enter_context(start_redis()).url
            url = asyncio.run(cluster.create_database()) if cluster is not None else args.database
            turns = run_turns(
                url,
                redis_url,
                folder,
                clients=args.clients,
                seconds=args.seconds,
                chunks=args.chunks,
                pace=args.pace,
                rounds=args.rounds,
                postmaster=postmaster,
            )
            asyncio.run(turns)
        if args.part in ("streams", "load", "all"):
            redis_url = args.redis or stack.enter_context(start_redis()).url
            url = asyncio.run(cluster.create_database()) if cluster is not None else args.database
            streams = run_streams(
                url, redis_url, folder, streams=args.streams, chunks=args.stream_chunks, pace=0.05
            )
            asyncio.run(streams)


if __name__ == "__main__":
    main()
