"""Creating a chat (``tk.chats.new_chat``: the CLI's ``chat --new``, the API's and the web UI's
"New chat") on a character with a ``--entries``-entry lorebook linked vs on one with none.

Run: ``.venv/bin/python benchmarks/new_chat.py [--entries 20000] [--runs 5]
[--baseline-src DIR]``.

Two data folders are made with this tree: the character "Mira" (a greeting and an alternate
one, with macros) with a SillyTavern world-info file of ``--entries`` entries named by the card
and linked to it, and the same character without a book. Each run is a new process (as a CLI
command is): it opens the folder and times one ``new_chat`` (cold: nothing of the store read
yet, and the chat verbs imported on this first use of ``tk.chats``, the same in both cases)
and then a second one on the same Tavern (warm: the store's records already parsed). Printed
per tree and case: the median and the best of ``--runs`` runs, and the ratio book ÷ none
(target: about 1, "a book costs a new chat nothing"). ``--baseline-src DIR`` (another
tavernkit's ``src``, e.g. a ``git worktree add`` of an older commit) runs the same processes on
the same folders, alternating with this tree's run by run. The load average is printed: the
figures are noisy on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _random_lorebook import random_lorebook  # type: ignore[import-not-found]

ROOT = Path(__file__).resolve().parent.parent
CASES = ("none", "book")


def card(with_book: bool) -> dict[str, Any]:
    return {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Mira",
            "description": "Mira keeps the harbour light.",
            "personality": "calm",
            "scenario": "A stormy night at the lighthouse.",
            "first_mes": "Welcome in, {{user}}. {{char}} has the kettle on.",
            "alternate_greetings": ["Mind the steps, {{user}}.", "Storm's up, {{user}}."],
            "mes_example": "",
            "extensions": {"world": "Harbour"} if with_book else {},
        },
    }


async def make_home(home: Path, entries: int | None) -> None:
    from tavernkit.facade import Tavern
    from tavernkit.models.settings import Settings

    async with Tavern(home, load_plugins=False) as tk:
        if entries is not None:
            data = json.dumps(random_lorebook(entries, random.Random(7))).encode()
            await tk.library.import_bytes(data, source="Harbour.json")
        data = json.dumps(card(entries is not None)).encode()
        await tk.library.import_bytes(data, source="Mira.json")
        if entries is not None:
            await tk.store.link("character", "Mira", "lorebook", "lorebook", "Harbour")
        settings = Settings()
        settings.selections.user_name = "Ada"
        await tk.store.put_settings(settings)


async def worker(home: Path) -> dict[str, float]:
    """One process's figures: a cold new chat after opening the folder, then a warm one."""
    from tavernkit.facade import Tavern

    async with Tavern(home, load_plugins=False) as tk:
        start = time.perf_counter()
        await tk.chats.new_chat("Mira")
        cold = time.perf_counter() - start
        start = time.perf_counter()
        await tk.chats.new_chat("Mira")
        warm = time.perf_counter() - start
    return {"cold": cold, "warm": warm}


def run_worker(home: Path, src: Path) -> dict[str, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run(
        [sys.executable, __file__, "--worker", str(home)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"worker on {home} failed:\n{out.stderr}")
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def report(label: str, runs: dict[str, list[dict[str, float]]]) -> None:
    for kind in ("cold", "warm"):
        p50 = {case: statistics.median(r[kind] for r in runs[case]) for case in CASES}
        best = {case: min(r[kind] for r in runs[case]) for case in CASES}
        cells = ", ".join(
            f"{case} {p50[case] * 1000:.1f} ms ({best[case] * 1000:.1f})" for case in CASES
        )
        ratio = p50["book"] / p50["none"]
        print(f"{label:>9} {kind}: p50 (best) {cells}; book ÷ none {ratio:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline-src", type=Path)
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(asyncio.run(worker(args.worker))))
        return
    sys.path.insert(0, str(ROOT / "src"))
    print(f"load average before: {Path('/proc/loadavg').read_text().strip()}")
    trees = {"this tree": ROOT / "src"}
    if args.baseline_src is not None:
        trees = {"baseline": args.baseline_src.resolve(), **trees}
    with tempfile.TemporaryDirectory() as tmp:
        homes = {case: Path(tmp) / case for case in CASES}
        asyncio.run(make_home(homes["none"], None))
        asyncio.run(make_home(homes["book"], args.entries))
        print(f"made Mira alone and with a linked {args.entries:,}-entry lorebook")
        runs: dict[str, dict[str, list[dict[str, float]]]] = {
            tree: {case: [] for case in CASES} for tree in trees
        }
        for _ in range(args.runs):
            for tree, src in trees.items():
                for case in CASES:
                    runs[tree][case].append(run_worker(homes[case], src))
    print(f"load average after: {Path('/proc/loadavg').read_text().strip()}")
    for tree in trees:
        report(tree, runs[tree])


if __name__ == "__main__":
    main()
