"""The web lorebook editor against the book's size: a 20,000-entry book (SillyTavern's entry
format, about 1.4 KB an entry with its content: a 28 MB file, the size one user reported a 30 s
stall on) against a 200-entry one, in one run.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/lorebook_editor.py [--sizes 200,20000]
[--repeat 3]`` (Debian's Chromium and Playwright, as the browser tests; about a minute).

Each size is a book imported through the library into a fresh server (uvicorn on loopback,
the browser tests' :class:`~web._site.Site`); Chromium then times, best of ``--repeat``:

- open: from the app's lorebook list to the book's page showing its entry count and first
  rows (the app's own scripts already loaded, as when a user picks the book);
- search: from typing a word one entry holds to that entry being the one row shown;
- save: an entry opened, its order changed, "Save lorebook" clicked, until the toast;
- add: "Add entry" clicked until the new entry's form is focused.

Printed: each time per size and the ratio of the largest size to the smallest (target: flat;
open < 1 s and save < 200 ms at 20,000 entries). On a shared machine the load is printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402

from tavernkit.models.lorebook import entry_template  # noqa: E402
from web._site import Site  # noqa: E402
from web.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

FILLER = "The harbour keeps its own counsel; the tide tables are pinned by the door. " * 4


def book_json(n: int) -> bytes:
    """A SillyTavern world-info file of ``n`` entries, every template field present."""
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
    return json.dumps({"entries": entries}, indent=4).encode()


CLEAR_TOAST = "() => { const t = document.querySelector('#toast'); if (t) t.textContent = ''; }"


def timed(action: Any) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def measure(page: Page, site: Site, book: str, n: int) -> dict[str, float]:
    def open_book() -> None:
        page.evaluate("() => { location.hash = '#/lorebooks'; }")
        expect(page.get_by_role("heading", name="Lorebooks")).to_be_visible()
        page.evaluate(f"() => {{ location.hash = '#/lorebook/{book}'; }}")
        shown = n + len(times.get("add", []))  # each round adds one
        expect(page.get_by_text(f"{shown} entries", exact=True)).to_be_visible()
        expect(page.locator("li.entry").first).to_be_visible()

    def search() -> None:
        page.get_by_label("Search entries").fill(f"marker{n // 2}")
        expect(page.locator("li.entry")).to_have_count(1)

    def save() -> None:
        row = page.locator("li.entry").first
        if "open" not in (row.get_attribute("class") or "").split():
            row.locator(".entry-toggle").click()
        order = row.get_by_label("Order", exact=True)
        order.fill(str(int(order.input_value() or "100") + 1))
        started = time.perf_counter()
        page.get_by_role("button", name="Save lorebook").click()
        expect(page.locator("#toast")).to_have_text("Lorebook saved")
        times.setdefault("save", []).append(time.perf_counter() - started)

    def add() -> None:
        page.get_by_role("button", name="Add entry").click()
        expect(
            page.locator("li.entry.open").first.get_by_label("Title", exact=True)
        ).to_be_focused()

    times: dict[str, list[float]] = {}
    for _ in range(ARGS.repeat):
        times.setdefault("open", []).append(timed(open_book))
        times.setdefault("search", []).append(timed(search))
        save()
        times.setdefault("add", []).append(timed(add))
        page.evaluate(CLEAR_TOAST)
    return {what: min(values) for what, values in times.items()}


def run_size(page: Page, site: Site, n: int) -> dict[str, float]:
    data = book_json(n)
    found = site.call(site.tk.library.import_bytes(data, source=f"Atlas {n}.json"), timeout=300)
    print(f"{n} entries: {len(data) / 1e6:.1f} MB", flush=True)
    return measure(page, site, found[0].id, n)


def main() -> None:
    sizes = [int(s) for s in ARGS.sizes.split(",")]
    results: dict[int, dict[str, float]] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        Site(Path(tmp) / "home") as site,
        sync_playwright() as pw,
    ):
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(base_url=site.url)
        page = context.new_page()
        page.set_default_timeout(120_000)
        page.goto("/#/lorebooks")
        for n in sizes:
            results[n] = run_size(page, site, n)
        browser.close()
    small, big = results[min(sizes)], results[max(sizes)]
    print(f"\nload: {os.getloadavg()[0]:.2f}")
    print(f"{'':8}" + "".join(f"{n:>12}" for n in sizes) + f"{'ratio':>10}")
    for what in ("open", "search", "save", "add"):
        row = "".join(f"{results[n][what] * 1000:>10.0f}ms" for n in sizes)
        print(f"{what:8}{row}{big[what] / small[what]:>9.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="200,20000")
    parser.add_argument("--repeat", type=int, default=3)
    ARGS = parser.parse_args()
    main()
