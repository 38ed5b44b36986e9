"""When a streamed reply's first text reaches the user: the chat turn's first shown piece
against the upstream's first piece, on a stream of 10-word sentences at 50 ms a piece.

Run: ``.venv/bin/python benchmarks/first_text.py [--turns 9] [--pace 0.05]
[--baseline-src DIR]`` (seconds per tree).

The upstream is the tests' scripted OpenAI-compatible server on loopback: three sentences of
ten words, one word a frame, ``--pace`` seconds apart (the role frame at once, so the first
word comes ``--pace`` after it). A turn is
``ChatService.send`` with a sink that notes when its first text arrives; the floor is a bare
streamed request to the same upstream (same reply) timed to its first word. Printed:
the p50 of each, and of the turn's first text over the floor: what the turn adds before the
first words show (the turn's own set-up, plus any text held back). ``--baseline-src`` (a
tavernkit ``src`` folder, e.g. of an older commit) runs the same on that tree first and prints
before -> after. On a shared machine print the load beside the figures.
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
from tavernkit.providers.events import TextDelta  # noqa: E402

CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {"name": "Mira", "first_mes": "Evening.", "extensions": {}},
}
WORDS = ["the", "lamp", "burns", "all", "night", "long", "over", "the", "dark", "sea"]
SENTENCES = 3


def reply(pace: float) -> Reply:
    pieces = []
    for _ in range(SENTENCES):
        pieces += [w + " " for w in WORDS[:-1]] + [WORDS[-1] + ". "]
    return Reply(text="".join(pieces), chunks=pieces, pace=pace)


class FirstText:
    """A sink that notes when its first text arrived."""

    def __init__(self) -> None:
        self.at: float | None = None

    def emit_nowait(self, event: Any) -> None:
        if self.at is None and isinstance(event, TextDelta) and event.text:
            self.at = time.perf_counter()

    async def emit(self, event: Any) -> None:
        self.emit_nowait(event)

    async def flush(self) -> None:
        return None

    async def finalize(self, result: Any) -> None:
        return None

    async def cleanup(self) -> None:
        return None


def _text_of(line: str) -> str:
    """The content of one SSE data line of a chat-completions stream ("" for none)."""
    if not line.startswith("data: {"):
        return ""
    choices = json.loads(line[6:]).get("choices") or [{}]
    return str((choices[0].get("delta") or {}).get("content") or "")


async def floor(client: httpx2.AsyncClient, url: str, server: ScriptedServer, pace: float) -> float:
    server.script(reply(pace))
    body = {"model": "m1", "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
    start = time.perf_counter()
    first: float | None = None
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as response:
        async for line in response.aiter_lines():
            if first is None and _text_of(line):
                first = time.perf_counter() - start
    assert first is not None, "the upstream sent no text"
    return first


async def measure(turns: int, pace: float) -> dict[str, float]:
    async with ScriptedServer() as server:
        with tempfile.TemporaryDirectory() as home:
            tk = await Tavern(Path(home), load_plugins=False).open()
            try:
                await tk.library.import_bytes(json.dumps(CARD).encode(), source="mira.json")
                profile = ConnectionProfile(
                    name="scripted",
                    api="chat",
                    source="openai",
                    base_url=server.base_url + "/v1",
                    model="m1",
                )
                await tk.store.put("connection_profile", profile, owner=tk.owner)
                settings = Settings()
                settings.selections.profile = "scripted"
                settings.selections.user_name = "Ada"
                await tk.store.put_settings(settings, owner=tk.owner)
                chats = ChatService(tk.runtime)
                chat = (await chats.new_chat("Mira")).id
                firsts: list[float] = []
                floors: list[float] = []
                async with httpx2.AsyncClient() as client:
                    for n in range(turns + 1):  # the first turn warms up, not counted
                        server.script(reply(pace))
                        sink = FirstText()
                        start = time.perf_counter()
                        await chats.send(chat, f"Tell me about the lamp ({n}).", sink=sink)
                        assert sink.at is not None, "no text reached the sink"
                        bare = await floor(client, server.base_url, server, pace)
                        if n:
                            firsts.append(sink.at - start)
                            floors.append(bare)
            finally:
                await tk.close()
    first, bare = statistics.median(firsts), statistics.median(floors)
    return {
        "first_text_ms": first * 1000,
        "floor_ms": bare * 1000,
        "added_ms": (first - bare) * 1000,
    }


def show(label: str, result: dict[str, float]) -> None:
    print(
        f"{label}: first text p50 {result['first_text_ms']:.1f} ms, upstream's first piece "
        f"(bare request) {result['floor_ms']:.1f} ms, added {result['added_ms']:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=9)
    parser.add_argument("--pace", type=float, default=0.05)
    parser.add_argument("--baseline-src", help="a tavernkit src folder to measure first")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.json:
        load = os.getloadavg()
        print(f"load average {load[0]:.2f} {load[1]:.2f} on {os.cpu_count()} CPUs")
    before = None
    if args.baseline_src:
        env = {**os.environ, "TAVERNKIT_BENCH_SRC": str(Path(args.baseline_src).resolve())}
        command = [sys.executable, __file__, "--turns", str(args.turns), "--pace", str(args.pace)]
        proc = subprocess.run(
            [*command, "--json"], env=env, capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise SystemExit(f"the baseline failed:\n{proc.stderr[-2000:]}")
        before = json.loads(proc.stdout.strip().splitlines()[-1])
        show(f"before ({args.baseline_src})", before)
    after = asyncio.run(measure(args.turns, args.pace))
    if args.json:
        print(json.dumps(after))
        return
    show("after (this tree)" if before else "this tree", after)
    if before:
        print(f"first text: {before['first_text_ms']:.1f} -> {after['first_text_ms']:.1f} ms")


if __name__ == "__main__":
    main()
