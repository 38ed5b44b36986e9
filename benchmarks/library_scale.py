"""A turn's cost against the size of the user's library: how many cards, lorebooks and chats
the store holds besides the one chat the turn is in.

Run: ``.venv/bin/python benchmarks/library_scale.py [--sizes 10,1000,5000] [--turns 15]
[--baseline-src DIR]`` (about a minute per tree).

Each size is a fresh store with ``N`` characters, ``N`` lorebooks and ``N`` chats, then the
bench's own card (with a linked lorebook), persona, profile and chat. A turn names its chat, card,
persona, profile and books by id or name, so each is a lookup among the others; the turn is
``ChatService.send`` against the tests' scripted upstream on loopback (answering at once),
and the bare round trip to it is subtracted, as in ``turn_path.py``. Printed: the p50 turn
overhead per size and the ratio of the largest to the smallest (target: flat, < 1.5: a lookup
must not read the library). ``--baseline-src`` (a tavernkit ``src`` folder, e.g. of a ``git
worktree add`` of an older commit) runs the same in a subprocess on that tree first and prints
before -> after. Ratios are within one run; on a shared machine print the load beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.environ.get("TAVERNKIT_BENCH_SRC") or str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "generation"))

import httpx2  # noqa: E402
from _scripted_server import Reply, ScriptedServer  # type: ignore[import-not-found]  # noqa: E402

from tavernkit.chat import ChatService  # noqa: E402
from tavernkit.facade import Tavern  # noqa: E402
from tavernkit.models.profile import ConnectionProfile  # noqa: E402
from tavernkit.models.settings import Settings  # noqa: E402

RATIO_TARGET = 1.5


def card(name: str, book: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": name,
        "description": f"{name} keeps the lighthouse.",
        "personality": "calm",
        "first_mes": f"Evening. I am {name}.",
        "extensions": {},
    }
    if book is not None:
        data["extensions"]["world"] = book
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}


BOOK = {"entries": {"0": {"uid": 0, "key": ["lamp"], "content": "The lamp is lit at dusk."}}}


async def build(home: Path, base_url: str, size: int) -> tuple[Tavern, str]:
    tk = await Tavern(home, load_plugins=False).open()
    try:
        return tk, await _fill(tk, base_url, size)
    except BaseException:
        await tk.close()
        raise


async def _fill(tk: Tavern, base_url: str, size: int) -> str:
    store = tk.store
    for i in range(size):
        await store.put("character", card(f"Keeper {i:05d}"), name=f"Keeper {i:05d}")
        await store.put("lorebook", BOOK, name=f"Book {i:05d}")
        await store.create_chat({"user_name": "Ada"}, name=f"Chat {i:05d}")
    await store.put("lorebook", BOOK, name="Harbour lore")
    mira = json.dumps(card("Mira", "Harbour lore")).encode()
    await tk.library.import_bytes(mira, source="mira.json")
    profile = ConnectionProfile(
        name="scripted", api="chat", source="openai", base_url=base_url + "/v1", model="m1"
    )
    await store.put("connection_profile", profile)
    settings = Settings()
    settings.selections.profile = "scripted"
    settings.selections.user_name = "Ada"
    await store.put_settings(settings)
    return (await tk.chats.new_chat("Mira")).id


async def bare_ms(url: str, body: dict[str, Any]) -> float:
    times = []
    async with httpx2.AsyncClient() as client:
        for _ in range(9):
            start = time.perf_counter()
            async with client.stream("POST", url, json=body) as response:
                async for _ in response.aiter_bytes():
                    pass
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


async def measure(sizes: list[int], turns: int) -> dict[int, float]:
    out: dict[int, float] = {}
    async with ScriptedServer([Reply(text="The lamp is lit.")] * 10_000) as server:
        # the first cell warms the process up (imports, tokenizer, code paths) and is not kept
        for n, size in enumerate([sizes[0], *sizes]):
            with tempfile.TemporaryDirectory() as tmp:
                tk, chat_id = await build(Path(tmp) / "home", server.base_url, size)
                try:
                    chats = ChatService(tk.runtime, stream_interval=0.2)
                    times = []
                    for i in range(turns + 2):
                        start = time.perf_counter()
                        outcome = await chats.send(chat_id, f"Is the lamp lit, {i}?")
                        times.append((time.perf_counter() - start) * 1000)
                        if outcome.status != "completed":
                            raise SystemExit(f"turn failed: {outcome}")
                    body = dict(server.requests[-1].body)
                    bare = await bare_ms(server.base_url + "/v1/chat/completions", body)
                finally:
                    await tk.close()
            if n:
                out[size] = statistics.median(times[2:]) - bare
                print(f"  {size:>6} of each: turn overhead p50 {out[size]:7.2f} ms", flush=True)
    return out


def report(label: str, result: dict[int, float]) -> None:
    small, large = min(result), max(result)
    print(
        f"{label}: {large} / {small} of each: {result[large] / result[small]:.2f}x "
        f"(target < {RATIO_TARGET}, flat)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10,1000,5000")
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--baseline-src", help="a tavernkit src folder to measure first")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    print(
        f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} on {os.cpu_count()} CPUs"
    )
    before: dict[int, float] | None = None
    if args.baseline_src:
        print(f"== before: {args.baseline_src}")
        env = {**os.environ, "TAVERNKIT_BENCH_SRC": str(Path(args.baseline_src).resolve())}
        proc = subprocess.run(
            [sys.executable, __file__, "--sizes", args.sizes, "--turns", str(args.turns), "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise SystemExit(f"the baseline failed:\n{proc.stderr[-2000:]}")
        lines = proc.stdout.strip().splitlines()
        print("\n".join(lines[:-1]))
        before = {int(k): v for k, v in json.loads(lines[-1]).items()}
        report("before", before)
        print("== after: this tree")
    after = asyncio.run(measure(sizes, args.turns))
    if args.json:
        print(json.dumps(after))
        return
    report("after" if before else "ratio", after)
    if before:
        for size in sizes:
            print(
                f"  {size:>6} of each: {before[size]:7.2f} -> {after[size]:7.2f} ms "
                f"({after[size] / before[size]:.2f}x)"
            )
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
