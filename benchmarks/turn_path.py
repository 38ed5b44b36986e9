"""The real turn path: ``ChatService.send`` end to end, store-backed, against an instant upstream.

Run: ``.venv/bin/python benchmarks/turn_path.py [--quick] [--turns 7]``.

Each cell is a fresh store holding one chat of ``M`` messages and a global lorebook of ``E``
entries (keys drawn from the chat's vocabulary, so the scan has real work). The upstream is the
scripted OpenAI-compatible server of the tests on loopback, answering at once; the time of a
bare HTTP round trip to it (same request body, measured in the same run) is subtracted, so the
printed *overhead* is everything the turn adds: storing the user's message, loading the state,
scanning world info, building and converting the prompt, the runner, storing the reply.

Printed per cell: the first turn in a fresh process on that store (``fresh``: a new
interpreter opens the store and sends once; the whole process's wall time, start-up and imports
included, is printed beside it), the first turn of this process on the store (``first``:
imports and tokenizer warm, but record caches empty and the books not compiled), the p50 of the
following turns, the peak memory one turn allocates (``tracemalloc``, in two more turns,
untimed), and at the end the 100k ÷ 1k ratio per lorebook size (flat means the cost does not
follow the chat's length). Targets: < 30 ms p50 at 10k × 2k, < 60 ms at 100k × 20k, ratio
< 1.5. The figures are noisy on a shared machine: say what the load was.
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
RATIO_TARGET = 1.5

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


async def run_cell(
    server: ScriptedServer, messages: int, entries: int, turns: int
) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        tk, chat_id = await build_store(Path(tmp) / "home", server.base_url, messages, entries)
        try:
            chats = ChatService(tk.runtime, stream_interval=0.2)
            times: list[float] = []
            peaks: list[float] = []
            rng = random.Random(7)
            for _ in range(turns + 1):
                gc.collect()
                start = time.perf_counter()
                outcome = await chats.send(chat_id, sentence(rng, 12))
                times.append((time.perf_counter() - start) * 1000)
                if outcome.status != "completed":
                    raise SystemExit(f"turn failed: {outcome}")
            # Memory apart: tracemalloc slows every allocation down, so it times nothing.
            for _ in range(2):
                gc.collect()
                tracemalloc.start()
                await chats.send(chat_id, sentence(rng, 12))
                peaks.append(tracemalloc.get_traced_memory()[1] / 2**20)
                tracemalloc.stop()
            fresh = await fresh_process_turn(tk.home, chat_id)
            # The bare upstream round trip, with the body the last turn sent.
            body = dict(server.requests[-1].body)
            async with httpx2.AsyncClient() as client:
                url = server.base_url + "/v1/chat/completions"
                bare = statistics.median([await round_trip_ms(client, url, body) for _ in range(7)])
        finally:
            await tk.close()
    warm = times[1:]
    return {
        "fresh_process": fresh["process_ms"],
        "fresh_turn": fresh["turn_ms"] - bare,
        "first": times[0] - bare,
        "p50": statistics.median(warm) - bare,
        "bare": bare,
        "peak_mb": max(peaks),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a subset (1k/10k/100k × 0/2k)")
    parser.add_argument("--turns", type=int, default=7, help="turns after the first, per cell")
    parser.add_argument("--fresh-turn", nargs=2, metavar=("HOME", "CHAT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fresh_turn:
        await fresh_turn_main(*args.fresh_turn)
        return
    chats = QUICK_CHATS if args.quick else CHATS
    books = QUICK_BOOKS if args.quick else BOOKS
    results: dict[tuple[int, int], dict[str, float]] = {}
    async with ScriptedServer([Reply(text="Aye.", usage=(12, 5))]) as server:
        columns = ("messages", "entries", "fresh ms", "(process)", "first ms", "p50 ms", "peak MB")
        print(" ".join(f"{c:>9}" for c in columns) + "  target")
        for entries in books:
            for messages in chats:
                r = await run_cell(server, messages, entries, args.turns)
                results[(messages, entries)] = r
                target = TARGETS.get((messages, entries))
                verdict = ""
                if target is not None:
                    verdict = f"< {target:.0f} ms {'ok' if r['p50'] < target else 'MISSED'}"
                values = (r["fresh_turn"], r["fresh_process"], r["first"], r["p50"], r["peak_mb"])
                cells = [f"{messages:>9,}", f"{entries:>9,}", *(f"{v:>9.1f}" for v in values)]
                print(" ".join(cells) + f"  {verdict}", flush=True)
    print(f"(overheads exclude the bare upstream round trip, ~{r['bare']:.1f} ms here)")
    for entries in books:
        if (100_000, entries) in results and (1_000, entries) in results:
            ratio = results[(100_000, entries)]["p50"] / max(results[(1_000, entries)]["p50"], 1e-9)
            ok = "ok" if ratio < RATIO_TARGET else "MISSED"
            print(f"100k ÷ 1k messages, {entries:,} entries: {ratio:.2f}x (< {RATIO_TARGET}) {ok}")


if __name__ == "__main__":
    asyncio.run(main())
