"""Another client's requests while a big chat is imported: the server on loopback (uvicorn, the
local user), a generated SillyTavern ``.jsonl`` chat posted to ``/import/raw`` while a second
client asks ``GET /characters`` every 10 ms.

Run: ``.venv/bin/python benchmarks/import_latency.py [--messages 20000] [--baseline-src DIR]``.

Printed: the file's size, the import's wall time, and the other client's request latency
(median and worst) during the import against the same requests on an idle server (target: the
worst adds < 100 ms). ``--baseline-src`` (a tavernkit ``src`` folder, e.g. of a ``git worktree
add`` of an older commit) runs the same in a subprocess on that tree first. The load average
is printed: on a shared machine the absolute figures move.
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

sys.path.insert(
    0, os.environ.get("TAVERNKIT_BENCH_SRC") or str(Path(__file__).resolve().parent.parent / "src")
)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "server"))

import httpx2 as httpx
from _live import live_server  # type: ignore[import-not-found]

from tavernkit.server.settings import ServerSettings


def chat_file(messages: int) -> bytes:
    """A chat of ``messages`` messages of a paragraph each (about 1.3 KB a line, swipes on
    the replies, as SillyTavern writes them)."""
    head = {
        "user_name": "Ada",
        "character_name": "Mira",
        "create_date": "2025-01-01@10h00m00s",
        "chat_metadata": {"integrity": "bench-import"},
    }
    text = "The lamp is lit at dusk and the keeper climbs the stair. " * 12
    lines: list[dict[str, Any]] = [head]
    for i in range(messages):
        user = i % 2 == 0
        line: dict[str, Any] = {
            "name": "Ada" if user else "Mira",
            "is_user": user,
            "is_system": False,
            "send_date": "2025-01-01@10h00m00s",
            "mes": f"{i}: {text}",
        }
        if not user:
            line["swipe_id"] = 0
            line["swipes"] = [line["mes"], f"another take {i}"]
        lines.append(line)
    return "\n".join(json.dumps(line) for line in lines).encode()


async def poll(client: httpx.AsyncClient, until: asyncio.Event) -> list[float]:
    times = []
    while not until.is_set():
        start = time.perf_counter()
        (await client.get("/characters", params={"limit": "20"})).raise_for_status()
        times.append((time.perf_counter() - start) * 1000)
        await asyncio.sleep(0.01)
    return times


async def measure(messages: int) -> dict[str, float]:
    data = chat_file(messages)
    with tempfile.TemporaryDirectory() as tmp:
        settings = ServerSettings(home=Path(tmp) / "home", upload_max_bytes=len(data) + 1024)
        async with (
            live_server(settings) as server,
            httpx.AsyncClient(base_url=server.url, timeout=600) as other,
            httpx.AsyncClient(base_url=server.url, timeout=600) as up,
        ):
            idle_done = asyncio.Event()
            idle_task = asyncio.create_task(poll(other, idle_done))
            await asyncio.sleep(1.0)
            idle_done.set()
            idle = await idle_task
            done = asyncio.Event()
            busy_task = asyncio.create_task(poll(other, done))
            start = time.perf_counter()
            r = await up.post("/import/raw", params={"name": "big.jsonl"}, content=data)
            took = time.perf_counter() - start
            done.set()
            busy = await busy_task
            r.raise_for_status()
    return {
        "bytes": len(data),
        "import_s": took,
        "idle_p50": statistics.median(idle),
        "idle_max": max(idle),
        "busy_p50": statistics.median(busy),
        "busy_max": max(busy),
        "busy_n": len(busy),
    }


def report(label: str, r: dict[str, float]) -> None:
    print(
        f"{label}: a {r['bytes'] / 1e6:.1f} MB chat imported in {r['import_s']:.2f} s; the other"
        f" client's requests: idle p50 {r['idle_p50']:.1f} ms / max {r['idle_max']:.1f} ms,"
        f" during the import p50 {r['busy_p50']:.1f} ms / max {r['busy_max']:.1f} ms"
        f" ({int(r['busy_n'])} requests; added at worst {r['busy_max'] - r['idle_max']:.0f} ms,"
        " target < 100)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--baseline-src", type=Path, help="a tavernkit src folder to compare")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # for the parent
    args = parser.parse_args()
    if args.json:
        print(json.dumps(asyncio.run(measure(args.messages))))
        return
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    if args.baseline_src:
        env = {**os.environ, "TAVERNKIT_BENCH_SRC": str(args.baseline_src.resolve())}
        cmd = [sys.executable, __file__, "--json", "--messages", str(args.messages)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"the baseline failed:\n{proc.stderr[-2000:]}")
        report("before", json.loads(proc.stdout.strip().splitlines()[-1]))
    report("after" if args.baseline_src else "this tree", asyncio.run(measure(args.messages)))
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
