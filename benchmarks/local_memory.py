"""The memory of a real ``tavernkit serve`` on the embedded model: its resident set (RSS, from
``/proc``) idle after the start (the model loaded before it listens), after ``--turns`` turns
spread over ``--chats`` chats of the demo card (more chats than llama.cpp has slots, so slots
are handed over and the RAM prompt cache fills; each chat's user writes its own lines unless
``--same-lines``), and idle again ``--idle`` seconds later, with
the peak (``VmHWM``). The load average is printed beside each figure: on a shared box the
timings move with it, the memory much less.

    .venv/bin/python benchmarks/local_memory.py [--turns 20] [--chats 4] [--src DIR ...]

Each ``--src`` (a tavernkit ``src`` folder, e.g. of an older commit) is measured in turn, in
one run, in the order given; the default is this tree's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx

ROOT = Path(__file__).resolve().parent.parent
TEXTS = (
    "Hello! Who are you?",
    "What is it like living in a lighthouse?",
    "Have you ever seen a shipwreck?",
    "What do you do when a storm comes?",
    "Tell me about the strangest night you remember.",
)


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def memory(pid: int) -> tuple[float, float]:
    """``(RSS, peak RSS)`` of ``pid`` in MB."""
    fields: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


@dataclass
class Figure:
    label: str
    rss: float
    peak: float
    load: str

    def show(self) -> str:
        return f"{self.label:<22} RSS {self.rss:6.0f} MB  (peak {self.peak:4.0f})  load {self.load}"


async def start(src: str, home: Path) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from tavernkit.cli import main; main()",
        "serve",
        "--port",
        "0",
        "--home",
        str(home),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": src},
    )
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 120)).decode()
    if not line.startswith("tavernkit serving http://"):
        proc.kill()
        raise SystemExit(f"tavernkit serve did not start: {line!r}")
    return proc, line.split()[2]


async def turn(client: httpx.AsyncClient, chat: str, text: str, max_tokens: int) -> str:
    """One streamed turn, read to its ``done``; the status it ended with."""
    status = "?"
    body = {"text": text, "overrides": {"max_tokens": max_tokens}}
    headers = {"accept": "text/event-stream"}
    async with client.stream("POST", f"/chats/{chat}/turns", json=body, headers=headers) as r:
        if r.status_code != 200:
            return f"HTTP {r.status_code}: {(await r.aread())[:200]!r}"
        event = ""
        async for line in r.aiter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and event == "done":
                status = json.loads(line.split(":", 1)[1])["status"]
    return status


async def measure(
    src: str, turns: int, chats: int, idle: float, max_tokens: int, same_lines: bool
) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="tk-mem-") as home:
        proc, url = await start(src, Path(home))
        figures: list[Figure] = []

        def note(label: str) -> None:
            figures.append(Figure(label, *memory(proc.pid), loadavg()))

        try:
            async with httpx.AsyncClient(base_url=url, timeout=300.0) as client:
                while (await client.get("/health")).status_code != 200:
                    await asyncio.sleep(0.1)
                await asyncio.sleep(idle)
                note("idle after the start")
                made = [
                    (await client.post("/chats", json={"character": "Wren"})).json()["id"]
                    for _ in range(chats)
                ]
                statuses: dict[str, int] = {}
                for n in range(turns):
                    chat = made[n % chats]
                    text = TEXTS[(n // chats) % len(TEXTS)]
                    if not same_lines:  # users of different chats write different words
                        text = f"{text} (I am visitor {n % chats + 1}.)"
                    done = await turn(client, chat, text, max_tokens)
                    statuses[done] = statuses.get(done, 0) + 1
                note(f"after {turns} turns")
                await asyncio.sleep(idle)
                note(f"idle {idle:g} s later")
                print(f"  turns: {statuses}")
        finally:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        return figures


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--turns", type=int, default=20)
    args.add_argument("--chats", type=int, default=4)
    args.add_argument("--idle", type=float, default=10.0)
    args.add_argument("--max-tokens", type=int, default=80)
    args.add_argument("--src", action="append", default=[])
    args.add_argument("--same-lines", action="store_true", help="every chat's user writes alike")
    opts = args.parse_args()
    print(f"{os.cpu_count()} cores, load {loadavg()}")
    for src in opts.src or [str(ROOT / "src")]:
        started = time.perf_counter()
        print(f"{src}:")
        figures = asyncio.run(
            measure(src, opts.turns, opts.chats, opts.idle, opts.max_tokens, opts.same_lines)
        )
        for figure in figures:
            print("  " + figure.show())
        print(f"  ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
