"""Changing one message of a long chat: an edit (with a ``runOnEdit`` regex script, so the
edit's scripts read the chat) and hiding a message, on a chat of ``--messages`` messages against
one of 200, each character with a ``--entries``-entry lorebook attached.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/message_change.py [--messages 20000]
[--entries 20000] [--runs 9]``.

The chats, card and book are ``cli_chat.py``'s inputs, imported with the CLI into one data
folder. In one process, each run edits the second-to-last message of each chat and then hides or
shows the last message, the two chats alternating; printed: the median and the best
of ``--runs`` runs per chat and the ratio long ÷ short (target: about 1, "a change to one
message costs the same on a chat of any length"). Before the change read only that message
(2026-12-06, quiet, `--runs 5`), an edit on the 20,000-message chat took 1,280 ms p50 (87.5x
the 200-message chat's): it loaded the whole chat twice. The load average is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _long_chats import short_and_long  # type: ignore[import-not-found]  # noqa: E402

from tavernkit import Tavern  # noqa: E402


async def change(tk_: Tavern, chat_id: str, last: int, run: int) -> tuple[float, float]:
    start = time.perf_counter()
    await tk_.chats.edit(chat_id, last - 1, f"edited x {run}")
    edited = time.perf_counter()
    await tk_.chats.set_hidden(chat_id, last, run % 2 == 0)
    hidden = time.perf_counter()
    return (edited - start) * 1000, (hidden - edited) * 1000


async def measure(home: Path, runs: int) -> dict[str, list[tuple[float, float]]]:
    async with Tavern(home=home) as tk_:
        await tk_.regex.add(
            {
                "scriptName": "edit",
                "findRegex": "/x/g",
                "replaceString": "{{char}}",
                "placement": [1, 2],
                "runOnEdit": True,
            }
        )
        chats = {c.character_name: c for c in await tk_.store.list_chats(owner=tk_.owner)}
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in chats}
        for run in range(runs):
            order = sorted(chats) if run % 2 == 0 else sorted(chats, reverse=True)
            for name in order:
                info = chats[name]
                times[name].append(await change(tk_, info.id, info.message_count - 1, run))
        return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        home = short_and_long(Path(tmp), args.messages, args.entries)
        times = asyncio.run(measure(home, args.runs))
    medians = {}
    for name in ("Short", "Long"):
        edits = [t[0] for t in times[name]]
        hides = [t[1] for t in times[name]]
        medians[name] = (statistics.median(edits), statistics.median(hides))
        print(
            f"{name:>5}: edit p50 {medians[name][0]:7.1f} ms (best {min(edits):.1f}), "
            f"hide p50 {medians[name][1]:7.1f} ms (best {min(hides):.1f})"
        )
    print(
        f"long ÷ short: edit {medians['Long'][0] / medians['Short'][0]:.2f}x, "
        f"hide {medians['Long'][1] / medians['Short'][1]:.2f}x (target ~1)"
    )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
