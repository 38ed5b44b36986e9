"""``tavernkit chat --once`` on a long imported chat with a big lorebook vs on a fresh chat.

Run: ``.venv/bin/python benchmarks/cli_chat.py [--messages 20000] [--entries 20000] [--runs 5]``.

A fresh data folder gets, through the CLI: a character card, a SillyTavern world-info file of
``--entries`` entries attached to it (keys drawn from the chat's vocabulary, so the scan has
work), a SillyTavern chat file of ``--messages`` messages, and a connection profile to the
scripted OpenAI-compatible server of the tests on loopback, which answers at once. Then, in
turn, ``tavernkit chat Mira --chat <imported> --json --once ...`` and ``tavernkit chat Mira
--new --json --once ...``: each a new process, as a script runs it. Printed per case: the
median and the best of ``--runs`` runs of the time to the first byte on stdout (the turn's
first event; the upstream answers at once) and of the whole command, and the ratio
imported ÷ fresh (target: about 1, "answers as fast as on a fresh chat"). Both cases scan
the same book; the fresh chat has only the card's greeting. A bare ``python -c pass`` of the
same run is printed as the floor. The figures are noisy on a shared machine: the load average
is printed. ``--baseline-src DIR`` (another tavernkit's ``src``, e.g. a ``git worktree add``
of an older commit) runs its ``chat --once`` on the same data folder too, alternating with this
tree's run by run (the data folder is made by this tree: the baseline must read its schema).

``--embedded``: instead, ``tavernkit chat --new --json --once Hi`` on the default set-up (the
demo character on the embedded model, which must be installed): the time to the first text
event, each run a new process and a new chat (so the same ~600-token prompt is evaluated from
nothing: the cold first reply of a fresh install), stopped with SIGINT once that text is out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "generation"))

from _random_lorebook import WORDS, random_lorebook  # type: ignore[import-not-found]  # noqa: E402
from _scripted_server import Reply, ScriptedServer  # type: ignore[import-not-found]  # noqa: E402

CLI = "import sys; sys.argv[0] = 'tavernkit'\nfrom tavernkit.cli import main\nmain()"


def _env(home: Path, src: Path = ROOT / "src") -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src) + os.pathsep + env.get("PYTHONPATH", "")
    env["TAVERNKIT_HOME"] = str(home)
    env["NO_COLOR"] = "1"
    return env


def tk(home: Path, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", CLI, *args],
        env=_env(home),
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"tavernkit {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
    return out.stdout


def timed_once(home: Path, *args: str, src: Path = ROOT / "src") -> tuple[float, float, str]:
    """(seconds to the first byte on stdout, seconds to exit, stdout) of one CLI process."""
    start = time.perf_counter()
    # unbuffered: a buffered read(1) may take the whole reply into its buffer, which
    # communicate() (reading the pipe's descriptor itself) never sees
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, *args],
        env=_env(home, src),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert proc.stdout is not None
    first = proc.stdout.read(1)
    first_s = time.perf_counter() - start
    rest, err = proc.communicate()
    total_s = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"tavernkit {' '.join(args)} failed:\n{err.decode()}")
    return first_s, total_s, (first + rest).decode()


def write_inputs(folder: Path, messages: int, entries: int, seed: int = 7) -> dict[str, Path]:
    rng = random.Random(seed)
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Mira",
            "description": "Mira keeps the harbour light.",
            "personality": "calm",
            "scenario": "A stormy night at the lighthouse.",
            "first_mes": "Welcome in, the kettle is on.",
            "mes_example": "",
        },
    }
    book = random_lorebook(entries, rng)
    lines = [
        json.dumps(
            {
                "user_name": "User",
                "character_name": "Mira",
                "create_date": "2026-01-01@00h00m00s",
                "chat_metadata": {},
            }
        )
    ]
    for i in range(messages):
        user = i % 2 == 1
        lines.append(
            json.dumps(
                {
                    "name": "User" if user else "Mira",
                    "is_user": user,
                    "is_system": False,
                    "send_date": "2026-01-01@00h00m00s",
                    "mes": " ".join(rng.choice(WORDS) for _ in range(20)),
                }
            )
        )
    paths = {
        "card": folder / "Mira.json",
        "book": folder / "Harbour.json",
        "chat": folder / "Mira - long.jsonl",
    }
    paths["card"].write_text(json.dumps(card), encoding="utf-8")
    paths["book"].write_text(json.dumps(book), encoding="utf-8")
    paths["chat"].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return paths


class Upstream:
    """The scripted server on its own event loop in a thread, for the CLI processes."""

    def __init__(self) -> None:
        self.base_url = ""
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with ScriptedServer([Reply(text="The lamp is lit, all is well.")]) as server:
            self.base_url = server.base_url
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> Upstream:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5)


def first_text(home: Path, src: Path) -> float:
    """Seconds from the start of ``tavernkit chat --new --json --once Hi`` to its first line
    (the reply's first text on the embedded model); the reply is then stopped (SIGINT)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "chat", "--new", "--json", "--once", "Hi"],
        env=_env(home, src),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert proc.stdout is not None
    line = proc.stdout.read(1)
    while not line.endswith(b"\n") and line:
        line += proc.stdout.read(1)
    seconds = time.perf_counter() - start
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    if not line.startswith(b'{"event": "text"'):
        raise SystemExit(f"no text first: {line!r}\n{err.decode()}")
    return seconds


def embedded_main(trees: dict[str, Path], runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        first_text(home, ROOT / "src")  # imports the demo character: not timed
        results: dict[str, list[float]] = {tree: [] for tree in trees}
        for i in range(runs):
            order = list(trees.items()) if i % 2 == 0 else list(trees.items())[::-1]
            for tree, src in order:
                results[tree].append(first_text(home, src))
                print(
                    f"run {i} {tree or 'this tree'}: {results[tree][-1]:.1f} s, "
                    f"load {os.getloadavg()[0]:.2f}",
                    flush=True,
                )
        for tree, rows in results.items():
            print(
                f"{tree or 'this tree'}: first text p50 {statistics.median(rows):.1f} s, "
                f"best {min(rows):.1f} s"
            )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline-src", type=Path, help="another tavernkit's src folder")
    parser.add_argument("--embedded", action="store_true", help="the default embedded model")
    args = parser.parse_args()
    trees = {"": ROOT / "src"}
    if args.baseline_src is not None:
        trees = {"before ": args.baseline_src, "after ": ROOT / "src"}
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    if args.embedded:
        embedded_main(trees, args.runs)
        return
    with tempfile.TemporaryDirectory() as tmp, Upstream() as upstream:
        folder = Path(tmp)
        home = folder / "home"
        paths = write_inputs(folder, args.messages, args.entries)
        start = time.perf_counter()
        tk(home, "import", str(paths["card"]), str(paths["book"]))
        tk(home, "import", str(paths["chat"]), "-c", "Mira")
        tk(home, "character", "lorebook", "Mira", "Harbour")
        print(
            f"imported a card, a {args.entries:,}-entry lorebook (attached) and a "
            f"{args.messages:,}-message chat in {time.perf_counter() - start:.1f} s"
        )
        tk(
            home,
            "profile",
            "add",
            "bench",
            "--api",
            "chat",
            "--source",
            "custom",
            "--base-url",
            upstream.base_url + "/v1",
            "--model",
            "scripted",
            "--key",
            "sk-bench",
            "--default",
        )
        listing = [json.loads(line) for line in tk(home, "chats", "list", "--json").splitlines()]
        long_chat = next(c for c in listing if int(c.get("messages", 0) or 0) >= args.messages)
        chat_ref = str(long_chat.get("id") or long_chat.get("name"))
        floor = statistics.median(_bare() for _ in range(3))
        cases = {
            "imported": ("--chat", chat_ref),
            "fresh": ("--new",),
        }
        results: dict[str, list[tuple[float, float]]] = {
            tree + name: [] for tree in trees for name in cases
        }
        for i in range(args.runs):
            # the trees take turns, each going first every other run
            order = list(trees.items()) if i % 2 == 0 else list(trees.items())[::-1]
            for tree, src in order:
                for name, extra in cases.items():
                    first, total, out = timed_once(
                        home,
                        "chat",
                        "Mira",
                        *extra,
                        "--json",
                        "--once",
                        f"The light tonight? {i}",
                        src=src,
                    )
                    if '"text": "The lamp is lit, all is well."' not in out:
                        raise SystemExit(f"{tree}{name}: unexpected reply {out!r}")
                    results[tree + name].append((first, total))
        print(f"python -c pass (the floor): {floor * 1000:.0f} ms")
        print(f"{'case':16} {'first byte p50':>15} {'best':>8} {'command p50':>12} {'best':>8}")
        for name, rows in results.items():
            firsts = [r[0] for r in rows]
            totals = [r[1] for r in rows]
            first_p50, total_p50 = statistics.median(firsts), statistics.median(totals)
            print(
                f"{name:16} {first_p50 * 1000:13.0f} ms {min(firsts) * 1000:5.0f} ms"
                f" {total_p50 * 1000:10.0f} ms {min(totals) * 1000:5.0f} ms"
            )
        for tree in trees:
            ratio = statistics.median(r[0] for r in results[tree + "imported"]) / statistics.median(
                r[0] for r in results[tree + "fresh"]
            )
            print(
                f"{tree}imported ÷ fresh, first byte p50: {ratio:.2f}x "
                "(target ~1: as fast as a fresh chat)"
            )
        print(f"load average at end: {os.getloadavg()[0]:.2f}")


def _bare() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
