"""World-info scan benchmark: SillyTavern's recorded timings vs ours, and a seeded generator.

Run: ``.venv/bin/python benchmarks/worldinfo.py [--quick]``.

(a) Every ``large_*`` conformance scenario (``$TAVERNKIT_CONFORMANCE_DIR`` or
    ``../shared/conformance``): SillyTavern's in-page ``timing_ms`` median vs our cold scan (new
    engine: book compiled) and warm scan (median of 10 with the compiled book), then warm with the
    per-message match memo cleared before each run ("memo-"), each with its ratio to
    SillyTavern, and whether the result equals the recording.
(b) A seeded generator (parameters printed): 20,000 entries x 2,000 messages x depth 50, cold
    and warm, peak traced memory of a warm scan, then the scaling table
    (entries 1k/5k/20k x depth 10/100/1,000).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
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

from tavernkit.models.lorebook import Lorebook
from tavernkit.worldinfo import Book, WorldInfoEngine, compile_book, scan
from tavernkit.worldinfo.book_cache import BookCache
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
    print(
        "(a) SillyTavern 1.18 large scenarios (turn 0; ST = median of its 5 timed runs, ST 1st ="
        " its first, cold-cache run)\n    cold = the first scan of this process's first fresh"
        " engine (compile + index + scan); cold5 = best of 5 more fresh engines (target: both"
        " >= 10x ST)"
    )
    header = (
        f"{'scenario':36} {'ST ms':>7} {'ST 1st':>7} {'cold ms':>8} {'ratio':>6} {'cold5':>6} "
        f"{'ratio':>6} {'warm ms':>7} {'ratio':>7} {'memo- ms':>8} {'ratio':>6}  same"
    )
    print(header)
    print("-" * len(header))
    for path in files:
        scenario = json.loads(path.read_text(encoding="utf-8"))
        turn = scenario["turns"][0]
        st_ms = statistics.median(scenario.get("timing_ms") or [float("nan")])

        def one(engine: WorldInfoEngine, scenario: Any = scenario, turn: Any = turn) -> Any:
            values = iter(list(turn["random_consumed"]))
            replay = ScenarioReplay(scenario, engine=engine)
            # what the scenarios before this one left is collected first: a full collection
            # of their garbage falling inside this scan is not this scan's cost (a turn's
            # process has not just run three other large scenarios)
            gc.collect()
            return timed(lambda: replay.run_turn(turn, values.__next__))

        st_first = (scenario.get("first_run_ms") or [float("nan")])[0]
        cold_ms, outcome = one(WorldInfoEngine())
        same = outcome.st_result == turn["result"] and (
            outcome.timed_state_after == turn["timed_state_after"]
        )
        cold5 = min(one(WorldInfoEngine())[0] for _ in range(5))
        engine = WorldInfoEngine()
        one(engine)
        warm = []
        for _ in range(repeats):
            ms, outcome = one(engine)
            warm.append(ms)
            same = same and outcome.st_result == turn["result"]
        warm_ms = statistics.median(warm)
        # Warm, but the per-message match memo of every index cleared first: the compiled
        # books and indexes are kept, the chat's messages are matched again.
        cleared = []
        for _ in range(repeats):
            for index in engine._indexes.values():
                index.matcher._cache.clear()
            ms, outcome = one(engine)
            cleared.append(ms)
            same = same and outcome.st_result == turn["result"]
        cleared_ms = statistics.median(cleared)
        print(
            f"{path.stem:36} {st_ms:7.1f} {st_first:7.1f} {cold_ms:8.1f} {st_ms / cold_ms:5.1f}x "
            f"{cold5:6.1f} {st_ms / cold5:5.1f}x {warm_ms:7.1f} {st_ms / warm_ms:6.1f}x "
            f"{cleared_ms:8.1f} {st_ms / cleared_ms:5.1f}x  {'yes' if same else 'NO'}"
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
    recursion_share: float = 0.1,
    regex_template: str = "/\\b{word}(?:s|es)?\\b/i",
) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """A book and a chat (newest first) whose scan activates about ``activation_rate`` of the
    entries at any size and depth.

    Keys are drawn from a vocabulary sized so that the ``depth`` newest messages hold the
    matching share of it. Recursion is on, so activated content must not flood the scan text:
    the share of entries whose content names a vocabulary word is set so that one loop's
    activations add about ``recursion_share`` x the window's words (each loop then adds about
    that fraction of the previous one's activations, whatever the entries/depth ratio)."""
    rng = random.Random(seed)
    window_words = min(depth, messages) * words_per_message
    # Activations of all loops ~ first loop x (1 + r + r^2 ...) = first / (1 - r).
    first_rate = activation_rate * (1 - recursion_share)
    # Of the entries with secondary keys, AND_ANY / AND_ALL (2 of the 5 logic draws below)
    # almost never pass; the others almost always do.
    can_fire = 1 - secondary_share * 2 / 5
    p_word = _word_hit_probability(min(0.99, first_rate / can_fire))
    vocab = max(100, int(window_words / p_word))
    content_word_share = min(1.0, recursion_share * window_words / (entries * first_rate))
    words = [f"w{i}" for i in range(vocab)]
    book: dict[str, Any] = {"entries": {}}
    for uid in range(entries):
        keys = [rng.choice(words) for _ in range(rng.randint(1, 4))]
        if rng.random() < regex_share:
            keys[0] = regex_template.format(word=keys[0])
        secondary: list[str] = []
        if rng.random() < secondary_share:
            secondary = [rng.choice(words) for _ in range(rng.randint(1, 2))]
        filler = " ".join(rng.choice(["lore", "myth", "ancient", "text"]) for _ in range(12))
        # Some contents name a vocabulary word, so recursion has something to find.
        extra = f" {rng.choice(words)}" if rng.random() < content_word_share else ""
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
        "regex_keys": regex_template,
        "content_word_share": round(content_word_share, 4),
        "seed": seed,
    }
    return book, chat, params


def _word_hit_probability(target: float) -> float:
    """The share p of the vocabulary to put in the window so that an entry with 1-4 keys
    (uniform) has a key in it with probability ``target``; the window holds distinct words
    ``V * (1 - exp(-window / V))`` of a vocabulary of V, so p is solved for directly."""
    lo, hi = 1e-9, 1.0
    for _ in range(60):
        p = (lo + hi) / 2
        if sum(1 - (1 - p) ** k for k in (1, 2, 3, 4)) / 4 < target:
            lo = p
        else:
            hi = p
    # distinct / V = 1 - exp(-window / V) = p  =>  V = window / -ln(1 - p)
    return -math.log(1 - p) if p < 1 else 1.0


class _Dumped:
    """A book whose ``to_wire()`` returns a dump made beforehand (what a model book hands the
    compiler, without timing pydantic's dump)."""

    def __init__(self, wire: dict[str, Any]) -> None:
        self._wire = wire

    def to_wire(self) -> dict[str, Any]:
        return self._wire


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
    # What a turn compiles: a stored book, vouched for by the store (compiled from its stored
    # JSON, neither checked for JSON-ness nor copied), cold each time; the best of three.
    model = Lorebook.model_validate(book)
    stored = json.loads(json.dumps(book))  # what the store hands over: parsed JSON

    def compile_stored() -> Any:
        cache = BookCache()
        cache.register(model, "bench", stored)
        return cache.get("Gen", model, compat=True)

    compile_model_ms = min(timed(compile_stored)[0] for _ in range(3))
    # A world-info dict handed to scan() (checked for JSON-ness and hashed) and a model book
    # (dumped by its to_wire(), which is not counted), cold each time; the best of three.
    compile_raw_ms = min(timed(lambda: compile_book("Gen", book))[0] for _ in range(3))
    model_entries = model.to_wire()
    compile_dumped_ms = min(
        timed(lambda: BookCache().get("Gen", _Dumped(model_entries), compat=True))[0]
        for _ in range(3)
    )
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
        f"   cold compile of {n_entries:,} entries (target < 300 ms for 20,000): stored book (a"
        f" turn's) {compile_model_ms:.0f} ms; world-info dict {compile_raw_ms:.0f} ms; model"
        f" book after its to_wire() {compile_dumped_ms:.0f} ms"
    )
    print(
        f"   compile {compile_ms:.0f} ms; cold scan {cold_ms:.0f} ms; warm scan median "
        f"{statistics.median(warm):.1f} ms (target < 200 ms); activated {len(result.activated)} "
        f"({rate:.1%}) in {result.loops} loops"
    )
    print(
        f"   peak traced memory: warm scan {peak / 2**20:.1f} MiB, cold scan incl. compile "
        f"{peak_cold / 2**20:.1f} MiB (target < 200 MB)"
    )

    # The same book with regex keys that are not word-shaped (no leading \b): they run on the
    # regex engine, per segment and once per recursion chunk.
    general = "/{word}(?:s|es)?\\b/i"
    book_g, chat_g, _ = generate(
        entries=n_entries, messages=n_messages, depth=depth, regex_template=general
    )
    engine_g = WorldInfoEngine()
    cold_g, result_g = timed(lambda: run_generated(book_g, chat_g, depth, engine_g))
    warm_g = [
        timed(lambda: run_generated(book_g, chat_g, depth, engine_g))[0] for _ in range(repeats)
    ]
    print(
        f"   with regex keys {general} (regex engine): cold {cold_g:.0f} ms; warm median "
        f"{statistics.median(warm_g):.1f} ms; activated {len(result_g.activated)} "
        f"in {result_g.loops} loops"
    )

    print()
    print(
        "   scaling: warm median ms (cold ms incl. compile) activated share / loops; 2,000 messages"
    )
    sizes = (1_000, 5_000) if quick else (1_000, 5_000, 20_000)
    depths = (10, 100, 1_000)
    width = 28
    print(f"   {'entries':>8} " + " ".join(f"{'depth ' + str(d):>{width}}" for d in depths))
    for n in sizes:
        cells = []
        for d in depths:
            bk, ch, _ = generate(entries=n, messages=2_000, depth=d, activation_rate=0.05)
            eng = WorldInfoEngine()
            cold, res = timed(lambda bk=bk, ch=ch, d=d, eng=eng: run_generated(bk, ch, d, eng))
            w = statistics.median(
                timed(lambda bk=bk, ch=ch, d=d, eng=eng: run_generated(bk, ch, d, eng))[0]
                for _ in range(max(3, repeats // 3))
            )
            share = len(res.activated) / n
            cells.append(f"{w:7.1f} ({cold:5.0f}) {share:5.1%}/{res.loops}")
        print(f"   {n:>8} " + " ".join(f"{c:>{width}}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller generator sizes")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    bench_scenarios(args.repeats)
    bench_generated(args.repeats, args.quick)


if __name__ == "__main__":
    main()
