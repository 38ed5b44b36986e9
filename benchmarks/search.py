"""Searching message text: the index (SQLite's trigram FTS5 table, PostgreSQL's word GIN
index) against reading the text of every message in scope, in one run.

Run: ``.venv/bin/python benchmarks/search.py [--messages 20000] [--runs 15] [--sqlite-only]
[--database postgresql://...]``.

One owner's ``--messages`` messages (200 a chat, 250-400 characters each, a few in Chinese)
and as many of another owner's (the index holds every owner's), on each backend; PostgreSQL
on a throwaway cluster the way the tests start one (tests/_services.py) unless
``--database`` names an empty database. Each query is ``Store.search_messages`` for a page of
50 with its total, run ``--runs`` times: printed are the hits, the median and p90 with the
index, the median reading every message's text instead (the same query and code, the index
left out: SQLite's ``instr``, PostgreSQL's ``strpos``) and the ratio. The figures are noisy
on a shared machine: say what the load was.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from _services import start_postgres  # type: ignore[import-not-found]  # noqa: E402
from tavernkit.store import PostgresStore, SqliteStore, open_postgres_store  # noqa: E402
from tavernkit.store._sqlite_search import MatchSql, sqlite_match  # noqa: E402
from tavernkit.store.sqlite import open_store as open_sqlite_store  # noqa: E402

PER_CHAT = 200
RARE = "zephyrine"
#: (label, query, narrowed to the first chat)
QUERIES: tuple[tuple[str, str, bool], ...] = (
    ("rare word", RARE, False),
    ("common word", "lantern", False),
    ("two words", "ferry lantern", False),
    ("word prefix", "lant", False),
    ("2 characters", "zq", False),
    ("CJK, 2 chars", "灯塔", False),
    ("CJK, 4 chars", "海上灯塔", False),
    ("one chat", "lantern", True),
)


def _text(rng: random.Random, i: int, words: Sequence[str]) -> str:
    if i % 50 == 7:
        return "我们在海上灯塔旁边等船，风很大。" * rng.randint(4, 7)
    picked = rng.choices(words, k=rng.randint(45, 70))
    if i % 4000 == 13:
        picked[rng.randrange(len(picked))] = RARE
    return " ".join(picked).capitalize() + "."


def _messages(seed: int, count: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    syllables = ["an", "ber", "cal", "dor", "el", "fin", "gar", "hol", "is", "jun", "ka", "lo"]
    words = ["".join(rng.choices(syllables, k=rng.randint(1, 3))) for _ in range(2000)]
    words += ["lantern", "ferry", "the", "a", "wind", "harbour"] * 15
    out = []
    for i in range(count):
        text = _text(rng, i, words)
        if i % 2:
            out.append({"name": "You", "is_user": True, "mes": text, "extra": {}})
        else:
            out.append({"name": "Mira", "is_user": False, "mes": text, "swipes": [text]})
    return out


def _postgres_scan(terms: Sequence[str], indexed: bool = True) -> MatchSql:
    return MatchSql(["strpos(lower(m.mes), lower(?)) > 0"] * len(terms), [*terms])


async def _fill(store: SqliteStore, count: int) -> str:
    """``count`` messages of the default owner's and as many of another's; the first chat."""
    first = ""
    for owner, seed in (("default", 1), ("other", 2)):
        messages = _messages(seed, count)
        for start in range(0, count, PER_CHAT):
            chat = await store.create_chat(
                {"user_name": "You"},
                messages[start : start + PER_CHAT],
                name=f"chat {start // PER_CHAT}",
                owner=owner,
            )
            first = first or chat.id
    return first


async def _timed(store: SqliteStore, query: str, chat: str | None, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await store.search_messages(query, chat=chat, limit=50)
        times.append((time.perf_counter() - start) * 1000)
    return times


async def _bench(store: SqliteStore, backend: str, count: int, runs: int) -> None:
    start = time.perf_counter()
    first = await _fill(store, count)
    if isinstance(store, PostgresStore):
        await store.refresh_statistics()  # what a copy or a big import leaves it
    print(f"\n{backend}: {2 * count:,} messages stored in {time.perf_counter() - start:.1f} s")
    print(
        f"  {'query':14} {'hits':>6} {'index ms':>9} {'p90':>7} {'scan ms':>9} {'scan/index':>10}"
    )
    indexed = store._search_match
    scan = _postgres_scan if backend == "postgres" else lambda t, i=True: sqlite_match(t, False)
    for label, query, narrow in QUERIES:
        chat = first if narrow else None
        total = (await store.search_messages(query, chat=chat, limit=50)).total
        with_index = await _timed(store, query, chat, runs)
        store._search_match = staticmethod(scan)  # type: ignore[assignment]
        try:
            without = await _timed(store, query, chat, max(3, runs // 3))
        finally:
            store._search_match = indexed  # type: ignore[assignment]
        mid, p90 = statistics.median(with_index), statistics.quantiles(with_index, n=10)[-1]
        base = statistics.median(without)
        print(f"  {label:14} {total:>6} {mid:>9.2f} {p90:>7.2f} {base:>9.2f} {base / mid:>9.1f}x")


async def run(args: argparse.Namespace, folder: Path, url: str | None) -> None:
    store: SqliteStore = await open_sqlite_store(folder / "search.db")
    try:
        await _bench(store, "sqlite", args.messages, args.runs)
    finally:
        await store.close()
    if url is not None:
        pg = await open_postgres_store(url, key_dir=folder / "keys")
        try:
            await _bench(pg, "postgres", args.messages, args.runs)
        finally:
            await pg.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000, help="per owner")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--sqlite-only", action="store_true")
    parser.add_argument("--database", help="an empty PostgreSQL database to use")
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores")
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tk-search-")))
        url = args.database
        if url is None and not args.sqlite_only:
            cluster = stack.enter_context(start_postgres())
            url = asyncio.run(cluster.create_database())
        asyncio.run(run(args, folder, url))


if __name__ == "__main__":
    main()
