"""World-info scan benchmark: SillyTavern's recorded timings vs ours, and a seeded generator.

Run: ``.venv/bin/python benchmarks/worldinfo.py [--quick]``.

(a) Every ``large_*`` conformance scenario (``$TAVERNKIT_CONFORMANCE_DIR`` or
    ``../shared/conformance``): SillyTavern's in-page ``timing_ms`` median vs our cold scan (new
    engine: book compiled) and warm scan (median of 10 with the compiled book), the ratio, and
    whether the result equals the recording.
(b) A seeded generator (parameters printed): 20,000 entries x 2,000 messages x depth 50, cold
    and warm, peak traced memory of a warm scan, then the scaling table
    (entries 1k/5k/20k x depth 10/100/1,000).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from tavernkit.worldinfo import Book, WorldInfoEngine, compile_book, scan
from tavernkit.worldinfo.replay import ScenarioReplay

REPO = Path(__file__).resolve().parent.parent


def conformance_dir() -> Path:
    env = os.environ.get("TAVERNKIT_CONFORMANCE_DIR")
    return Path(env) if env else REPO.parent / "shared" / "conformance"


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return (time.perf_counter() - start) * 1000, out


# --- (a) conformance scenarios --------------------------------------------------------------


def bench_scenarios(repeats: int) -> None:
    folder = conformance_dir() / "st-1.18" / "worldinfo"
    files = sorted(folder.glob("large_*.json"))
    if not files:
        print(f"(a) no large_* scenarios under {folder}; skipped")
        return
    print("(a) SillyTavern 1.18 large scenarios (turn 0; ST = median of its 5 timed runs)")
    header = f"{'scenario':40} {'ST ms':>8} {'cold ms':>8} {'warm ms':>8} {'ratio':>7}  same"
    print(header)
    print("-" * len(header))
    for path in files:
        scenario = json.loads(path.read_text(encoding="utf-8"))
        turn = scenario["turns"][0]
        st_ms = statistics.median(scenario.get("timing_ms") or [float("nan")])

        def one(engine: WorldInfoEngine, scenario: Any = scenario, turn: Any = turn) -> Any:
            values = iter(list(turn["random_consumed"]))
            replay = ScenarioReplay(scenario, engine=engine)
            return timed(lambda: replay.run_turn(turn, values.__next__))

        cold_ms, outcome = one(WorldInfoEngine())
        same = outcome.st_result == turn["result"] and (
            outcome.timed_state_after == turn["timed_state_after"]
        )
        engine = WorldInfoEngine()
        one(engine)
        warm = []
        for _ in range(repeats):
            ms, outcome = one(engine)
            warm.append(ms)
            same = same and outcome.st_result == turn["result"]
        warm_ms = statistics.median(warm)
        print(
            f"{path.stem:40} {st_ms:8.1f} {cold_ms:8.1f} {warm_ms:8.1f} "
            f"{st_ms / warm_ms:6.1f}x  {'yes' if same else 'NO'}"
        )


# --- (b) generator ---------------------------------------------------------------------------


def generate(
    *,
    entries: int,
    messages: int,
    depth: int,
    seed: int = 42,
    regex_share: float = 0.05,
    secondary_share: float = 0.20,
    activation_rate: float = 0.05,
    words_per_message: int = 20,
) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """A book and a chat (newest first) whose scan activates about ``activation_rate`` of the
    entries: keys are drawn from a vocabulary sized so that the ``depth`` newest messages hold
    roughly that share of it."""
    rng = random.Random(seed)
    window_words = min(depth, messages) * words_per_message
    # P(entry hit) ~ 1 - (1 - p)^2.5 keys, p = distinct window words / vocabulary.
    p_word = 1 - (1 - activation_rate) ** (1 / 2.5)
    vocab = max(100, int(window_words / p_word))
    words = [f"w{i}" for i in range(vocab)]
    book: dict[str, Any] = {"entries": {}}
    for uid in range(entries):
        keys = [rng.choice(words) for _ in range(rng.randint(1, 4))]
        if rng.random() < regex_share:
            keys[0] = f"/\\b{keys[0]}(?:s|es)?\\b/i"
        secondary: list[str] = []
        if rng.random() < secondary_share:
            secondary = [rng.choice(words) for _ in range(rng.randint(1, 2))]
        filler = " ".join(rng.choice(["lore", "myth", "ancient", "text"]) for _ in range(12))
        # One content word in five is a vocabulary word, so recursion has something to find.
        extra = f" {rng.choice(words)}" if rng.random() < 0.2 else ""
        book["entries"][str(uid)] = {
            "uid": uid,
            "key": keys,
            "keysecondary": secondary,
            "content": f"Entry {uid}: {filler}{extra}",
            "selective": True,
            "selectiveLogic": rng.choice([0, 0, 1, 2, 3]),
            "order": rng.randint(1, 300),
            "position": rng.choice([0, 1, 4]),
            "probability": 100,
            "useProbability": True,
            "depth": 4,
            "group": "",
        }
    chat = [
        ("User: " if i % 2 else "Aria: ")
        + " ".join(rng.choice(words) for _ in range(words_per_message))
        for i in range(messages)
    ]
    params = {
        "entries": entries,
        "keys_per_entry": "1-4",
        "regex_share": regex_share,
        "secondary_share": secondary_share,
        "recursion": True,
        "target_activation_rate": activation_rate,
        "messages": messages,
        "scan_depth": depth,
        "vocabulary": vocab,
        "seed": seed,
    }
    return book, chat, params


def run_generated(
    book: dict[str, Any], chat: list[str], depth: int, engine: WorldInfoEngine
) -> Any:
    return scan(
        [Book("Gen", book)],
        chat,
        max_context=10_000_000,
        settings={
            "world_info_depth": depth,
            "world_info_budget": 100,
            "world_info_recursive": True,
        },
        rng=random.Random(0).random,
        engine=engine,
    )


def bench_generated(repeats: int, quick: bool) -> None:
    n_entries, n_messages, depth = (5_000, 500, 50) if quick else (20_000, 2_000, 50)
    book, chat, params = generate(entries=n_entries, messages=n_messages, depth=depth)
    print()
    print("(b) generated: " + ", ".join(f"{k}={v}" for k, v in params.items()))
    engine = WorldInfoEngine()
    compile_ms, _ = timed(lambda: compile_book("Gen", book))
    cold_ms, result = timed(lambda: run_generated(book, chat, depth, engine))
    warm = [timed(lambda: run_generated(book, chat, depth, engine))[0] for _ in range(repeats)]
    gc.collect()
    tracemalloc.start()
    run_generated(book, chat, depth, engine)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    tracemalloc.start()
    run_generated(book, chat, depth, WorldInfoEngine())
    _, peak_cold = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rate = len(result.activated) / n_entries
    print(
        f"   compile {compile_ms:.0f} ms; cold scan {cold_ms:.0f} ms; warm scan median "
        f"{statistics.median(warm):.1f} ms (target < 200 ms); activated {len(result.activated)} "
        f"({rate:.1%}) in {result.loops} loops"
    )
    print(
        f"   peak traced memory: warm scan {peak / 2**20:.1f} MiB, cold scan incl. compile "
        f"{peak_cold / 2**20:.1f} MiB (target < 200 MB)"
    )

    print()
    print("   scaling (warm median ms; 2,000 messages, cold in parentheses)")
    sizes = (1_000, 5_000) if quick else (1_000, 5_000, 20_000)
    depths = (10, 100, 1_000)
    print(f"   {'entries':>8} " + " ".join(f"{'depth ' + str(d):>18}" for d in depths))
    for n in sizes:
        cells = []
        for d in depths:
            bk, ch, _ = generate(entries=n, messages=2_000, depth=d, activation_rate=0.05)
            eng = WorldInfoEngine()
            cold, _ = timed(lambda bk=bk, ch=ch, d=d, eng=eng: run_generated(bk, ch, d, eng))
            w = statistics.median(
                timed(lambda bk=bk, ch=ch, d=d, eng=eng: run_generated(bk, ch, d, eng))[0]
                for _ in range(max(3, repeats // 3))
            )
            cells.append(f"{w:8.1f} ({cold:6.0f})")
        print(f"   {n:>8} " + " ".join(f"{c:>18}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller generator sizes")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    bench_scenarios(args.repeats)
    bench_generated(args.repeats, args.quick)


if __name__ == "__main__":
    main()
