"""The server's side of the lorebook editor on a big book, in process: one entry changed
(``LorebookAdmin.patch_entry``: the editor's save), one added (``add_entry``) and the whole
book's text read (``Store.get_record_text``: the editor's open, an export), on a 20,000-entry
book (the editor benchmark's, 36 MB) in a fresh SQLite store.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/lorebook_entries.py [--entries 20000]
[--runs 9] [--baseline-src DIR]`` (``--baseline-src``: another tavernkit's ``src``, e.g. an
older commit's, measured first in the same run: before -> after).

Printed: the median and the best of ``--runs`` of each, and the load average (the figures are
noisy on a shared machine). Target: an entry saved or added in well under 200 ms whatever the
book's size (issue 40).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


FILLER = "The harbour keeps its own counsel; the tide tables are pinned by the door. " * 4


def book(n: int) -> dict[str, Any]:
    """``benchmarks/lorebook_editor.py``'s book: ``n`` entries, every template field."""
    from tavernkit.models.lorebook import entry_template

    entries: dict[str, Any] = {}
    for i in range(n):
        entry = {"uid": i, **entry_template()}
        entry.update(
            key=[f"key{i}", "harbour"],
            keysecondary=["tide"] if i % 3 == 0 else [],
            comment=f"Entry {i}",
            content=f"Lore number {i}: the marker{i} stone. {FILLER}",
            order=100 + i % 7,
            displayIndex=i,
        )
        entries[str(i)] = entry
    return {"entries": entries}


async def measure(entries: int, runs: int) -> None:
    from tavernkit.lorebook_admin import LorebookAdmin
    from tavernkit.store.sqlite import open_store

    with tempfile.TemporaryDirectory() as folder:
        store = await open_store(Path(folder) / "store.db")
        ref = await store.put("lorebook", book(entries), name="Big")
        admin = LorebookAdmin(store, "default")
        cases = {
            "save an entry": lambda i: admin.patch_entry(ref.id, str(i), {"order": 50 + i}),
            "add an entry": lambda i: admin.add_entry(ref.id, {"comment": f"new {i}"}),
            "whole book text": lambda i: store.get_record_text("lorebook", ref.id),
        }
        for label, call in cases.items():
            times = []
            for i in range(runs):
                start = time.perf_counter()
                await call(i)
                times.append((time.perf_counter() - start) * 1000)
            median = statistics.median(times)
            print(f"  {label:16} median {median:8.1f} ms  best {min(times):8.1f} ms")
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--baseline-src", type=Path)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.inner:
        asyncio.run(measure(options.entries, options.runs))
        return
    print(f"load average: {os.getloadavg()[0]:.2f}; {options.entries:,} entries")
    sources = [("before", options.baseline_src)] if options.baseline_src else []
    for label, src in [*sources, ("this tree", ROOT / "src")]:
        print(f"{label} ({src}):", flush=True)
        env = {**os.environ, "PYTHONPATH": str(Path(src).resolve())}
        command = [sys.executable, __file__, "--inner", "--entries", str(options.entries)]
        subprocess.run([*command, "--runs", str(options.runs)], env=env, check=True)
    print(f"load average: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
