"""The character grid's cost per page against the size of the library: the server's
``GET /characters`` (a page by name, one newest first, a search keystroke, ``?q=``, the page
with the tag chips, ``?facets=true``, a tag filter, ``?tag=``, the favourites, ``?fav=true``,
favourites first, ``?sort=fav``, and latest chat first, ``?sort=chatted``) at 20 cards and at
5,000, in one run. Each case's page is as many lines at both sizes as the small library
answers it (at most 20: its whole list), so the two answers carry the same lines and the same
statements (a count beside a full page) but for the library's size: a filter the small
library fills no page of would otherwise set a full page (and its count) at 5,000 against a
few lines at 20. The favourites are 3 lines (a favourite every seventh card), the tag a third
carry 7; the label says so.

Run: ``.venv/bin/python benchmarks/library_page.py [--sizes 20,5000] [--requests 60]
[--baseline-src DIR]``.

Each size is a fresh home with ``N`` cards (tags, a favourite every seventh, a chat with every
tenth), served twice:
in process (the app's whole ASGI stack through httpx's ASGI transport: the server's own cost)
and by uvicorn on loopback (as a client such as the web UI sees it: HTTP both ways), the local
user. Both sizes are served at once and their requests interleaved (one of each in turn,
after five to warm up: the page's card facets cached, as on a server in use), so a change of
the machine's load weighs on both alike. Printed: the median and the fastest request of each
case per size, and the ratio of the largest size to the smallest (target < 1.5: a page reads
its lines through the store's listing indexes, the chips the kept tag counts, which lines'
characters have a picture one query, never a line per card). ``--baseline-src`` (a
tavernkit ``src`` folder, e.g. of a ``git worktree add`` of an older commit) runs the same in a
subprocess on that tree first. The load average is printed: on a shared machine the absolute
figures move, the ratio less, the fastest requests least.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(
    0, os.environ.get("TAVERNKIT_BENCH_SRC") or str(Path(__file__).resolve().parent.parent / "src")
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "server"))

import httpx2 as httpx
from _live import live_server  # type: ignore[import-not-found]

from tavernkit.facade import Tavern
from tavernkit.server.app import create_app
from tavernkit.server.settings import ServerSettings

RATIO_TARGET = 1.5
#: the requests timed per size: what the grid asks for as it opens and as a user types
CASES = {
    "page (by name)": {"offset": "0", "limit": "20", "sort": "name"},
    "page (newest)": {"offset": "0", "limit": "20", "sort": "newest"},
    "search keystroke": {"offset": "0", "limit": "20", "sort": "name", "q": "keeper 0"},
    # the grid's first request: a page and every tag with its count (the chips)
    "facets": {"offset": "0", "limit": "20", "sort": "name", "facets": "true"},
    # a chip clicked: the tag every card carries, and one a third of them do
    "tag filter": {"offset": "0", "limit": "20", "sort": "name", "tag": "SEA"},
    "tag filter (1 in 3)": {"offset": "0", "limit": "20", "sort": "name", "tag": "shift 1"},
    "favourites": {"offset": "0", "limit": "20", "sort": "name", "fav": "true"},
    "favourites first": {"offset": "0", "limit": "20", "sort": "fav"},
    "latest chat first": {"offset": "0", "limit": "20", "sort": "chatted"},
}
#: one card in this many has a chat (the order by latest chat)
CHATTED_EVERY = 10


def card(i: int) -> dict[str, Any]:
    name = f"Keeper {i:05d}"
    data = {
        "name": name,
        "description": f"{name} keeps the lighthouse. " * 40,
        "personality": "calm",
        "first_mes": f"Evening. I am {name}.",
        "tags": ["sea", f"shift {i % 3}"],
        "extensions": {"fav": i % 7 == 0},
    }
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}


async def fill(home: Path, size: int) -> None:
    tk = await Tavern(home, load_plugins=False).open()
    try:
        header = {"user_name": "You", "character_name": "Keeper", "chat_metadata": {}}
        for i in range(size):
            ref = await tk.store.put("character", card(i), name=f"Keeper {i:05d}")
            if i % CHATTED_EVERY == 0:
                await tk.store.create_chat(header, [], name=f"chat {i}", character=ref.id)
    finally:
        await tk.close()


async def same_lines(
    small: httpx.AsyncClient, params: dict[str, str]
) -> tuple[dict[str, str], int]:
    """``params`` with the page as long as the small library answers it (its lines at most
    the case's limit; one when it answers none), and that length."""
    r = await small.get("/characters", params=params)
    r.raise_for_status()
    lines = max(1, len(r.json()["items"]))
    return {**params, "limit": str(lines)}, lines


async def timed(
    clients: dict[int, httpx.AsyncClient], requests: int
) -> dict[int, dict[str, float]]:
    """Each case's median per size, the sizes' requests interleaved (one of each in turn), so
    a change of the machine's load meanwhile weighs on every size alike."""
    out: dict[int, dict[str, float]] = {size: {} for size in clients}
    for case, asked in CASES.items():
        params, lines = await same_lines(clients[min(clients)], asked)
        label = case if lines == int(asked["limit"]) else f"{case}, {lines} lines"
        times: dict[int, list[float]] = {size: [] for size in clients}
        for n in range(requests + 5):
            for size, client in clients.items():
                start = time.perf_counter()
                r = await client.get("/characters", params=params)
                took = (time.perf_counter() - start) * 1000
                r.raise_for_status()
                if n >= 5:  # the first ones warm up: the page's facets cached, code paths run
                    times[size].append(took)
        for size in clients:
            out[size][f"{label} p50"] = statistics.median(times[size])
            # the fastest: what the request costs with the machine's other load least in the way
            out[size][f"{label} best"] = min(times[size])
    return out


async def measure(sizes: list[int], requests: int) -> dict[int, dict[str, float]]:
    result: dict[int, dict[str, float]] = {size: {} for size in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        homes = {size: Path(tmp) / f"home {size}" for size in sizes}
        for size, home in homes.items():
            await fill(home, size)
        async with contextlib.AsyncExitStack() as stack:
            clients = {}
            for size, home in homes.items():
                app = create_app(ServerSettings(home=home), tavern=Tavern(home, load_plugins=False))
                await stack.enter_async_context(app.router.lifespan_context(app))
                transport = httpx.ASGITransport(app=app)
                clients[size] = await stack.enter_async_context(
                    httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")
                )
            for size, cells in (await timed(clients, requests)).items():
                result[size].update({f"in process: {k}": v for k, v in cells.items()})
        async with contextlib.AsyncExitStack() as stack:
            clients = {}
            for size, home in homes.items():
                server = await stack.enter_async_context(live_server(ServerSettings(home=home)))
                clients[size] = await stack.enter_async_context(server.client())
            for size, cells in (await timed(clients, requests)).items():
                result[size].update({f"loopback: {k}": v for k, v in cells.items()})
    for size in sizes:
        cells = ", ".join(f"{k} {v:6.2f} ms" for k, v in result[size].items())
        print(f"  {size:>6} cards: {cells}", file=sys.stderr, flush=True)
    return result


def report(label: str, result: dict[int, dict[str, float]]) -> None:
    small, large = min(result), max(result)
    for case in result[small]:
        ratio = result[large][case] / result[small][case]
        verdict = "ok" if ratio < RATIO_TARGET else "OVER"
        print(
            f"{label}: {case}: {result[small][case]:6.2f} ms at {small} cards, "
            f"{result[large][case]:6.2f} ms at {large}: {ratio:.2f}x "
            f"(target < {RATIO_TARGET}: {verdict})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20,5000")
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--baseline-src", type=Path, help="a tavernkit src folder to compare")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # for the parent
    args = parser.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    if args.json:
        print(json.dumps(asyncio.run(measure(sizes, args.requests))))
        return
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    if args.baseline_src:
        env = {**os.environ, "TAVERNKIT_BENCH_SRC": str(args.baseline_src.resolve())}
        cmd = [sys.executable, __file__, "--json", "--sizes", args.sizes]
        cmd += ["--requests", str(args.requests)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"the baseline failed:\n{proc.stderr[-2000:]}")
        before = {int(k): v for k, v in json.loads(proc.stdout.strip().splitlines()[-1]).items()}
        report("before", before)
    after = asyncio.run(measure(sizes, args.requests))
    report("ratio" if not args.baseline_src else "after", after)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
