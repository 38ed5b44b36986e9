"""Storing a turn's reply place (its user message and the empty, partial reply, one
transaction) on SQLite: a trip to the store's thread per statement, or the whole transaction
in one trip (``append_messages(..., detached=True)``, what a turn does).

Run: ``.venv/bin/python benchmarks/reply_place.py [--chats 200] [--rounds 3]`` (seconds).

The same store and chats for both ways, alternating round by round so drift hits both alike:
one place at a time (a turn's latency to store it), and one place in each of ``--chats``
chats at once (turns starting together: the transactions queue on the store's one writer).
Printed: p50 of each way per round and the ratio (per statement / one trip). There is no
target of its own: it explains where a turn's start spends the store's time, for
``benchmarks/server.py``'s first token and its streams.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from tavernkit.store.sqlite import SqliteStore, open_store

PLACE = [
    {"name": "Ada", "is_user": True, "mes": "Hello there, how was the road? " * 4},
    {"name": "Mira", "is_user": False, "mes": "", "swipes": [""]},
]


async def one_at_a_time(store: SqliteStore, chats: list[str], detached: bool) -> float:
    """p50 ms of one place stored while nothing else writes."""
    took = []
    for chat in chats:
        start = time.perf_counter()
        await store.append_messages(chat, PLACE, last_partial=(0,), detached=detached)
        took.append(time.perf_counter() - start)
    return statistics.median(took) * 1000


async def all_at_once(store: SqliteStore, chats: list[str], detached: bool) -> float:
    """Places stored per second, one in each chat, all started together."""
    start = time.perf_counter()
    await asyncio.gather(
        *(store.append_messages(c, PLACE, last_partial=(0,), detached=detached) for c in chats)
    )
    return len(chats) / (time.perf_counter() - start)


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(Path(tmp) / "bench.db")
        try:
            chats = [
                (await store.create_chat({"chat_metadata": {}}, [], name=f"chat {i}")).id
                for i in range(args.chats)
            ]
            await one_at_a_time(store, chats[:20], True)  # warm up both ways
            await one_at_a_time(store, chats[:20], False)
            latency: dict[bool, list[float]] = {False: [], True: []}
            rate: dict[bool, list[float]] = {False: [], True: []}
            for n in range(args.rounds):
                for detached in (n % 2 == 0, n % 2 != 0):  # which goes first alternates
                    latency[detached].append(await one_at_a_time(store, chats, detached))
                    rate[detached].append(await all_at_once(store, chats, detached))
        finally:
            await store.close()
    slow, fast = statistics.median(latency[False]), statistics.median(latency[True])
    few, many = statistics.median(rate[False]), statistics.median(rate[True])
    print(f"a reply place (user message + partial reply), {args.rounds} rounds:")
    print(
        f"  one at a time: {slow:.3f} ms a trip per statement, {fast:.3f} ms in one trip "
        f"({slow / fast:.2f}x)"
    )
    print(
        f"  {args.chats} at once: {few:.0f}/s a trip per statement, {many:.0f}/s in one trip "
        f"({many / few:.2f}x)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    load = os.getloadavg()
    print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    try:
        import uvloop

        uvloop.run(main(parser.parse_args()))
    except ImportError:
        asyncio.run(main(parser.parse_args()))
