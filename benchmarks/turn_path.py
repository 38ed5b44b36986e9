"""The real turn path: ``ChatService.send`` end to end, store-backed, against an instant upstream.

Run: ``.venv/bin/python benchmarks/turn_path.py [--quick] [--turns 31]``.

Each cell is a fresh store holding one chat of ``M`` messages and a global lorebook of ``E``
entries (keys drawn from the chat's vocabulary, so the scan has real work). The upstream is the
scripted OpenAI-compatible server of the tests on loopback, answering at once; the time of a
bare HTTP round trip to it (same request body) is subtracted, so the printed *overhead* is
everything the turn adds: storing the user's message, loading the state, scanning world info,
building and converting the prompt, the runner, storing the reply.

The cells of one lorebook size are open together and their turns interleave: after each
cell's first turn, ``--turns`` rounds of one turn (then one bare round trip) per cell, the
order rotating each round. A swing in the machine's load then lands on every cell alike, where
cells run one after another once gave 100k ÷ 1k 1.27x in one run and 1.02x in the next.

Printed per cell: the first turn in a fresh process on that store (``fresh``: a new
interpreter opens the store and sends once; the whole process's wall time, start-up and imports
included, is printed beside it), the first turn of this process on the store (``first``:
imports and tokenizer warm, but record caches empty and the books not compiled), the fastest
(``best``: the fastest turn less the fastest bare round trip) and the median (``p50``) of the
rounds' turns, and the peak memory one turn allocates (``tracemalloc``, in two more turns,
untimed). At the end, the 100k ÷ 1k ratio per lorebook size: of the p50s, of the bests, and
the median of the rounds' own ratios (``paired``: a round's two turns ran moments apart, so
slower load swings cancel); flat means the cost does not follow the chat's length. Targets:
< 30 ms p50 at 10k × 2k, < 60 ms at 100k × 20k, p50 ratio ≤ 1.2. The figures are noisy on a
shared machine: say what the load was.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "generation"))

# after the path setup above: these come from this tree's src/ and tests/
import httpx2  # noqa: E402
from _scripted_server import Reply, ScriptedServer  # type: ignore[import-not-found]  # noqa: E402

from tavernkit.chat import ChatService  # noqa: E402
from tavernkit.facade import Tavern  # noqa: E402
from tavernkit.models.profile import ConnectionProfile  # noqa: E402
from tavernkit.models.settings import Settings  # noqa: E402

CHATS = (100, 1_000, 10_000, 100_000)
BOOKS = (0, 2_000, 20_000)
QUICK_CHATS = (1_000, 10_000, 100_000)
QUICK_BOOKS = (0, 2_000)
TARGETS = {(10_000, 2_000): 30.0, (100_000, 20_000): 60.0}
RATIO_TARGET = 1.2

WORDS = (  # noqa: SIM905 (one string reads better than 31 quoted words)
    "ferry harbour lantern storm rope tide gull captain ticket bell fog island deck cabin "
    "compass chart anchor sail wave shore dock rain wind night dusk star map coin oar"
).split()

CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Mira",
        "description": "{{char}} keeps the ferry. {{user}} is a passenger.",
        "personality": "calm",
        "scenario": "A ferry crossing at dusk.",
        "first_mes": "Welcome aboard, {{user}}.",
        "mes_example": "",
        "alternate_greetings": [],
        "creator_notes": "",
        "system_prompt": "",
        "post_history_instructions": "",
        "tags": [],
        "creator": "bench",
        "character_version": "1",
        "extensions": {},
    },
}


def sentence(rng: random.Random, n: int = 24) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)) + "."


def chat_messages(count: int, rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        user = i % 2 == 1
        text = sentence(rng)
        msg: dict[str, Any] = {
            "name": "Ada" if user else "Mira",
            "is_user": user,
            "is_system": False,
            "send_date": "2025-01-31T14:05:09.000Z",
            "mes": text,
            "extra": {},
        }
        if not user:
            msg.update(swipes=[text], swipe_id=0, swipe_info=[{"extra": {}}])
        out.append(msg)
    return out


def lorebook(entries: int, rng: random.Random) -> dict[str, Any]:
    book: dict[str, Any] = {"entries": {}}
    for uid in range(entries):
        book["entries"][str(uid)] = {
            "uid": uid,
            "key": [f"{rng.choice(WORDS)}{uid % 97}", rng.choice(WORDS) + "s"],
            "keysecondary": [],
            "comment": f"entry {uid}",
            "content": sentence(rng, 12),
            "constant": False,
            "selective": True,
            "order": uid % 100,
            "position": 0,
            "disable": False,
            "probability": 100,
            "useProbability": True,
            "depth": 4,
        }
    return book


async def build_store(home: Path, base_url: str, messages: int, entries: int) -> tuple[Tavern, str]:
    rng = random.Random(messages * 31 + entries)
    tk = await Tavern(home, load_plugins=False).open()
    await tk.library.import_bytes(json.dumps(CARD).encode(), source="mira.json")
    profile = ConnectionProfile(
        name="scripted", api="chat", source="openai", base_url=base_url + "/v1", model="m1"
    )
    await tk.store.put("connection_profile", profile)
    settings = Settings()
    settings.selections.profile = "scripted"
    settings.selections.user_name = "Ada"
    if entries:
        await tk.store.put("lorebook", lorebook(entries, rng), name="atlas")
        settings.world_info.global_books = ["atlas"]
    await tk.store.put_settings(settings)
    header = {"user_name": "Ada", "character_name": "Mira", "chat_metadata": {}}
    info = await tk.store.create_chat(
        header, chat_messages(messages, rng), name="bench", character="Mira"
    )
    return tk, info.id


async def round_trip_ms(client: httpx2.AsyncClient, url: str, body: dict[str, Any]) -> float:
    start = time.perf_counter()
    async with client.stream("POST", url, json=body) as response:
        async for _ in response.aiter_bytes():
            pass
    return (time.perf_counter() - start) * 1000


async def fresh_process_turn(home: Path, chat_id: str) -> dict[str, float]:
    """One turn in a new interpreter on the same store (the upstream keeps serving here): the
    turn's time, and the whole process's wall time (start-up, imports, opening the store)."""
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--fresh-turn",
        str(home),
        chat_id,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"fresh-process turn failed:\n{err.decode()[-2000:]}")
    result: dict[str, float] = json.loads(out.decode().strip().splitlines()[-1])
    result["process_ms"] = (time.perf_counter() - started) * 1000
    return result


async def fresh_turn_main(home: str, chat_id: str) -> None:
    tk = await Tavern(Path(home), load_plugins=False).open()
    try:
        begin = time.perf_counter()
        chats = ChatService(tk.runtime, stream_interval=0.2)
        outcome = await chats.send(chat_id, "A fresh process asks.")
        turn = time.perf_counter() - begin
    finally:
        await tk.close()
    if outcome.status != "completed":
        raise SystemExit(f"turn failed: {outcome}")
    print(json.dumps({"turn_ms": turn * 1000}))


class Cell:
    """One store (``messages`` × ``entries``) held open while its group's turns interleave."""

    def __init__(self, messages: int, entries: int, tk: Tavern, chat_id: str) -> None:
        self.messages, self.entries = messages, entries
        self.tk, self.chat_id = tk, chat_id
        self.chats = ChatService(tk.runtime, stream_interval=0.2)
        self.rng = random.Random(7)
        self.first = 0.0
        self.turns: list[float] = []
        self.bares: list[float] = []
        self.body: dict[str, Any] = {}

    async def turn(self, server: ScriptedServer) -> float:
        gc.collect()
        start = time.perf_counter()
        outcome = await self.chats.send(self.chat_id, sentence(self.rng, 12))
        took = (time.perf_counter() - start) * 1000
        if outcome.status != "completed":
            raise SystemExit(f"turn failed: {outcome}")
        self.body = dict(server.requests[-1].body)
        return took

    async def bare(self, client: httpx2.AsyncClient, url: str) -> float:
        """The bare upstream round trip, with the body this cell's last turn sent."""
        return await round_trip_ms(client, url, self.body)

    async def peak_mb(self) -> float:
        # Memory apart: tracemalloc slows every allocation down, so it times nothing.
        peaks = []
        for _ in range(2):
            gc.collect()
            tracemalloc.start()
            await self.chats.send(self.chat_id, sentence(self.rng, 12))
            peaks.append(tracemalloc.get_traced_memory()[1] / 2**20)
            tracemalloc.stop()
        return max(peaks)


async def run_group(
    server: ScriptedServer, home: Path, entries: int, chats: tuple[int, ...], turns: int
) -> dict[int, dict[str, Any]]:
    """The cells of one lorebook size, all open at once: after each cell's first turn, ``turns``
    rounds of one turn and one bare round trip per cell, the order rotating each round, so a
    swing in the machine's load lands on every cell alike instead of on whichever ran then."""
    cells = []
    for messages in chats:
        tk, chat_id = await build_store(
            home / f"{messages}x{entries}", server.base_url, messages, entries
        )
        cells.append(Cell(messages, entries, tk, chat_id))
    try:
        for cell in cells:
            cell.first = await cell.turn(server)
        url = server.base_url + "/v1/chat/completions"
        async with httpx2.AsyncClient() as client:
            for cell in cells:  # a connection to the upstream, open before the rounds
                await cell.bare(client, url)
            for n in range(turns):
                shift = n % len(cells)
                for cell in cells[shift:] + cells[:shift]:
                    cell.turns.append(await cell.turn(server))
                    cell.bares.append(await cell.bare(client, url))
        # Before the fresh processes: a turn after another process wrote reloads what it cached.
        peaks = [await cell.peak_mb() for cell in cells]
        results = {}
        for cell, peak_mb in zip(cells, peaks, strict=True):
            fresh = await fresh_process_turn(cell.tk.home, cell.chat_id)
            bare = statistics.median(cell.bares)
            results[cell.messages] = {
                "fresh_process": fresh["process_ms"],
                "fresh_turn": fresh["turn_ms"] - bare,
                "first": cell.first - bare,
                "best": min(cell.turns) - min(cell.bares),
                "p50": statistics.median(cell.turns) - bare,
                "bare": bare,
                "peak_mb": peak_mb,
                "rounds": [t - bare for t in cell.turns],
            }
        return results
    finally:
        for cell in cells:
            await cell.tk.close()


def print_row(messages: int, entries: int, r: dict[str, Any]) -> None:
    target = TARGETS.get((messages, entries))
    verdict = ""
    if target is not None:
        verdict = f"< {target:.0f} ms {'ok' if r['p50'] < target else 'MISSED'}"
    keys = ("fresh_turn", "fresh_process", "first", "best", "p50", "peak_mb")
    cells = [f"{messages:>9,}", f"{entries:>9,}", *(f"{r[k]:>9.1f}" for k in keys)]
    print(" ".join(cells) + f"  {verdict}", flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a subset (1k/10k/100k × 0/2k)")
    parser.add_argument("--turns", type=int, default=31, help="timed rounds, after the first turn")
    parser.add_argument("--fresh-turn", nargs=2, metavar=("HOME", "CHAT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fresh_turn:
        await fresh_turn_main(*args.fresh_turn)
        return
    chats = QUICK_CHATS if args.quick else CHATS
    books = QUICK_BOOKS if args.quick else BOOKS
    results: dict[tuple[int, int], dict[str, Any]] = {}
    columns = ("messages", "entries", "fresh ms", "(process)", "first ms", "best ms", "p50 ms")
    async with ScriptedServer([Reply(text="Aye.", usage=(12, 5))]) as server:
        print(" ".join(f"{c:>9}" for c in (*columns, "peak MB")) + "  target")
        for entries in books:
            with tempfile.TemporaryDirectory() as tmp:
                group = await run_group(server, Path(tmp), entries, chats, args.turns)
            for messages, r in group.items():
                results[(messages, entries)] = r
                print_row(messages, entries, r)
    bares = [r["bare"] for r in results.values()]
    print(f"(overheads exclude the bare upstream round trip, {min(bares):.1f}–{max(bares):.1f} ms)")
    for entries in books:
        if (100_000, entries) in results and (1_000, entries) in results:
            big, small = results[(100_000, entries)], results[(1_000, entries)]
            ratio = big["p50"] / max(small["p50"], 1e-9)
            best = big["best"] / max(small["best"], 1e-9)
            paired = statistics.median(
                b / max(s, 1e-9) for b, s in zip(big["rounds"], small["rounds"], strict=True)
            )
            ok = "ok" if ratio <= RATIO_TARGET else "MISSED"
            print(
                f"100k ÷ 1k messages, {entries:,} entries: {ratio:.2f}x p50, {best:.2f}x best,"
                f" {paired:.2f}x paired (≤ {RATIO_TARGET} p50) {ok}"
            )


if __name__ == "__main__":
    asyncio.run(main())
