"""STscript on a long chat: a quick-reply click and two script runs (``/echo {{lastMessage}}``,
``/sendas name=X hi``) on a chat of ``--messages`` messages against one of 200, each character
with a ``--entries``-entry lorebook attached.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/script_run.py [--messages 20000]
[--entries 20000] [--runs 9]``.

The chats, card and book are ``cli_chat.py``'s inputs, imported with the CLI into one data
folder, and a quick-reply set whose button runs ``/echo {{lastMessage}} | /setvar key=seen
{{lastUserMessage}}``. In one process, each run clicks the button, runs the echo and then the
``/sendas`` (which adds a message) on each chat, the two chats alternating; printed: the median
and the best of ``--runs`` runs per chat and the ratio long ÷ short (target: about 1, "a script
costs what it reads, not the chat's length"). Before the script host paged the chat
(67234de, 2026-12-06, load 2.3–2.7, ``--runs 9``), a click on the 20,000-message chat took
1,238 ms p50 (111x the 200-message chat's): it loaded the whole chat twice, once with the
books. The load average is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
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
from tavernkit.models.quick_reply import QuickReplySet  # noqa: E402
from tavernkit.quick_reply_bindings import QR_KIND  # noqa: E402

CLICK = "/echo {{lastMessage}} | /setvar key=seen {{lastUserMessage}}"
STEPS = ("click", "echo", "sendas")


async def steps(tk_: Tavern, chat_id: str) -> tuple[float, ...]:
    """Milliseconds of a click, an echo and a ``/sendas`` on the chat, in that order."""
    marks = [time.perf_counter()]
    outcomes = [await tk_.run_quick_reply(chat_id, "Tools", "Look")]
    marks.append(time.perf_counter())
    outcomes.append(await tk_.run_script(chat_id, "/echo {{lastMessage}}"))
    marks.append(time.perf_counter())
    outcomes.append(await tk_.run_script(chat_id, "/sendas name=X hi"))
    marks.append(time.perf_counter())
    failed = [o.error for o in outcomes if o.error is not None]
    if failed:
        raise SystemExit(f"a script failed: {failed[0]}")
    return tuple((b - a) * 1000 for a, b in itertools.pairwise(marks))


async def measure(home: Path, runs: int) -> dict[str, list[tuple[float, ...]]]:
    async with Tavern(home=home) as tk_:
        qr_set = QuickReplySet.model_validate(
            {"name": "Tools", "qrList": [{"id": 1, "label": "Look", "message": CLICK}]}
        )
        await tk_.store.put(QR_KIND, qr_set, owner=tk_.owner, name="Tools")
        chats = {c.character_name: c for c in await tk_.store.list_chats(owner=tk_.owner)}
        times: dict[str, list[tuple[float, ...]]] = {name: [] for name in chats}
        for run in range(runs):
            order = sorted(chats) if run % 2 == 0 else sorted(chats, reverse=True)
            for name in order:
                times[name].append(await steps(tk_, chats[name].id))
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
    medians: dict[str, list[float]] = {}
    for name in ("Short", "Long"):
        columns = [[t[k] for t in times[name]] for k in range(len(STEPS))]
        medians[name] = [statistics.median(c) for c in columns]
        cells = ", ".join(
            f"{step} p50 {m:7.1f} ms (best {min(c):.1f})"
            for step, m, c in zip(STEPS, medians[name], columns, strict=True)
        )
        print(f"{name:>5}: {cells}")
    ratios = ", ".join(
        f"{step} {long / short:.2f}x"
        for step, long, short in zip(STEPS, medians["Long"], medians["Short"], strict=True)
    )
    print(f"long ÷ short: {ratios} (target ~1)")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
