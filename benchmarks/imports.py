"""Import cost: ``-X importtime`` totals of ``import tavernkit``, ``from tavernkit import Tavern``
(what a turn's process loads) and ``tavernkit --help``, in fresh interpreters.

Run: ``.venv/bin/python benchmarks/imports.py [--runs 5] [--baseline-src DIR]``
(``--baseline-src``: another tavernkit's ``src`` folder, e.g. a ``git worktree add`` of an older
commit, measured the same way first in the same run: before -> after).

Each figure is the median over ``--runs`` fresh processes with bytecode cached (one warm-up
run first). ``-X importtime`` counts the time spent importing (the cumulative microseconds of
the top-level imports), so interpreter start-up is out; the wall-clock time of each command
is printed beside it, with ``python -c pass`` as the baseline of the same run. Targets:
``import tavernkit`` < 150 ms, ``from tavernkit import Tavern`` < 300 ms (issue 40: it was
1.48 s, importing the whole engine; now a Tavern made and opened imports it, the last row),
``tavernkit --help`` < 300 ms (wall clock, as a user sees it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASES = {
    "python -c pass": ("pass", None),
    "import tavernkit": ("import tavernkit", 150.0),
    "from tavernkit import Tavern": ("from tavernkit import Tavern", 300.0),
    "tavernkit --help": (
        "import sys; sys.argv = ['tavernkit', '--help']\n"
        "from tavernkit.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass",
        300.0,
    ),
    "... and a Tavern made and opened": (
        "import asyncio, tempfile\n"
        "from tavernkit import Tavern\n"
        "async def main():\n"
        "    with tempfile.TemporaryDirectory() as home:\n"
        "        async with Tavern(home, load_plugins=False):\n"
        "            pass\n"
        "asyncio.run(main())",
        None,
    ),
}

#: the rows whose target is on the import time (the others' is on the wall clock)
IMPORT_TARGETS = ("import tavernkit", "from tavernkit import Tavern")


def import_ms(stderr: str) -> float:
    """The sum of the top-level imports' cumulative times (``-X importtime`` lines whose name
    is not indented)."""
    total = 0
    for line in stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        parts = line.split("|")
        if len(parts) == 3 and parts[2].startswith(" ") and not parts[2].startswith("  "):
            try:
                total += int(parts[1])
            except ValueError:  # the header line
                continue
    return total / 1000


def run(code: str, src: Path) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    wall = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{code!r} failed:\n{done.stderr[-2000:]}")
    return import_ms(done.stderr), wall


def table(src: Path, runs: int) -> dict[str, float]:
    """Print the rows for the tree ``src``; returns each row's import time."""
    rows = []
    for label, (code, target) in CASES.items():
        run(code, src)  # warm-up: bytecode written, files in the page cache
        samples = [run(code, src) for _ in range(runs)]
        imports = statistics.median(s[0] for s in samples)
        wall = statistics.median(s[1] for s in samples)
        rows.append((label, imports, wall, target))
    base_wall = rows[0][2]
    print(f"{'':34} {'imports ms':>10} {'wall ms':>8} {'- python':>9}  target")
    for label, imports, wall, target in rows:
        verdict = ""
        if target is not None:
            shown = imports if label in IMPORT_TARGETS else wall
            verdict = f"< {target:.0f} ms {'ok' if shown < target else 'MISSED'}"
        print(f"{label:34} {imports:>10.1f} {wall:>8.1f} {wall - base_wall:>9.1f}  {verdict}")
    return {label: imports for label, imports, _, _ in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline-src", type=Path, help="another tavernkit's src folder")
    args = parser.parse_args()
    print(f"load: {os.getloadavg()[0]:.2f}")
    before = None
    if args.baseline_src is not None:
        print(f"before ({args.baseline_src}):")
        before = table(args.baseline_src, args.runs)
        print("after (this tree):")
    after = table(ROOT / "src", args.runs)
    if before is not None:
        for label in IMPORT_TARGETS:
            print(f"{label}: {before[label]:.0f} -> {after[label]:.0f} ms import time")


if __name__ == "__main__":
    main()
