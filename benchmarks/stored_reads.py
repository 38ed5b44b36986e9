"""Reading stored records back: ``model_validate`` vs the trusted path, in one run.

Run: ``.venv/bin/python benchmarks/stored_reads.py [--entries 20000] [--runs 5]``.

What each ``tavernkit chat --once`` process (and a server after any edit) spends turning the
stored JSON of a lorebook back into its model: the book of ``benchmarks/cli_chat.py``
(``--entries`` entries), read through a real SQLite store with ``get_shared_record`` (the call
``load_chat_state`` makes; a fresh store each run, so nothing is cached), then the bare model
build of the same JSON both ways. Printed: best and median of ``--runs`` and the ratio
validate ÷ trusted (the garbage collector paused for both, as the store does). The load average
is printed: on a shared machine the absolute figures move, the ratio much less.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from cli_chat import write_inputs  # noqa: E402

from tavernkit.models import _trusted  # noqa: E402
from tavernkit.models.lorebook import Lorebook  # noqa: E402
from tavernkit.store import open_store  # noqa: E402


def best_and_median(fn: Callable[[], Any], runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        gc.collect()
        gc.disable()
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
        gc.enable()
    return min(times), statistics.median(times)


async def store_read(folder: Path, book: dict[str, Any], runs: int, trusted: bool) -> list[float]:
    """``get_shared_record`` of the book from a fresh store each run (nothing cached)."""
    path = folder / f"bench-{trusted}.db"
    async with await open_store(path) as store:
        await store.put("lorebook", book, name="Harbour")
    times = []
    original = _trusted.from_stored
    for _ in range(runs):
        async with await open_store(path) as store:
            if not trusted:  # the old read path: every stored record validated again
                store_mod = sys.modules["tavernkit.store.sqlite"]
                store_mod.from_stored = lambda cls, data: cls.model_validate(data)  # type: ignore[attr-defined]
            try:
                gc.collect()
                start = time.perf_counter()
                await store.get_shared_record("lorebook", "Harbour")
                times.append((time.perf_counter() - start) * 1000)
            finally:
                sys.modules["tavernkit.store.sqlite"].from_stored = original  # type: ignore[attr-defined]
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        book = json.loads(write_inputs(folder, 1, args.entries)["book"].read_text("utf-8"))
        _trusted.from_stored(Lorebook, {"entries": {}})  # the per-class plans, built once
        print(f"{args.entries:,}-entry lorebook, {args.runs} runs, ms")
        print(f"{'read':44} {'best':>8} {'median':>8}")
        rows: dict[str, tuple[float, float]] = {}
        for trusted in (False, True):
            times = asyncio.run(store_read(folder, book, args.runs, trusted))
            label = f"store get_shared_record, {'trusted' if trusted else 'validated'}"
            rows[label] = (min(times), statistics.median(times))
        rows["Lorebook.model_validate"] = best_and_median(
            lambda: Lorebook.model_validate(book), args.runs
        )
        rows["from_stored(Lorebook, ...)"] = best_and_median(
            lambda: _trusted.from_stored(Lorebook, book), args.runs
        )
        for label, (best, median) in rows.items():
            print(f"{label:44} {best:8.0f} {median:8.0f}")
        labels = list(rows)
        for slow, fast in ((labels[0], labels[1]), (labels[2], labels[3])):
            print(f"{slow} ÷ trusted, median: {rows[slow][1] / rows[fast][1]:.2f}x")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
