"""The lorebook editor opens a book from its entries' lines (titles, keys, switches: no
content), never reading the whole book: the content of an entry comes when its row opens, and
a search of the content (any case, accented letters too) is answered by the server; an entry
edited here is found by its new words at once. At desktop and phone sizes."""

from __future__ import annotations

import json
import re
from typing import Any

from playwright.sync_api import Page, Request, expect

from tavernkit.models.lorebook import entry_template

from ._site import Site
from .conftest import screenshot

N = 300


def _book_file() -> bytes:
    entries: dict[str, Any] = {}
    for i in range(N):
        entry = {"uid": i, **entry_template()}
        entry.update(
            key=[f"key{i}"],
            comment=f"Lamp {i}",
            content=f"The beacon{i} burns on the cliff. " * 20,
            displayIndex=i,
        )
        entries[str(i)] = entry
    entries["150"]["content"] = "Under the quay, the ÉTOILE stone waits."
    return json.dumps({"entries": entries}).encode()


def test_a_book_opens_from_its_lines_and_its_content_is_searched_by_the_server(
    page: Page, site: Site
) -> None:
    book = site.call(site.tk.library.import_bytes(_book_file(), source="Beacons.json"))[0].id
    asked: list[str] = []

    def seen(request: Request) -> None:
        if request.method == "GET" and "/lorebooks/" in request.url:
            asked.append(request.url.split("/", 3)[3])

    page.on("request", seen)
    entries = f"lorebooks/{book}/entries"
    with page.expect_response(lambda r: r.url.endswith(entries)) as lines:
        page.goto(f"/#/lorebook/{book}")
    expect(page.get_by_text(f"{N} entries", exact=True)).to_be_visible()
    expect(page.locator("li.entry")).to_have_count(50)
    expect(page.locator("li.entry .entry-toggle").first).to_have_text("Lamp 0")
    assert len(lines.value.body()) < N * 200  # the lines: no entry's content came

    # a word only the content holds, any case, accented: the server finds the entry
    with page.expect_response(lambda r: f"{entries}?content=" in r.url):
        page.get_by_label("Search entries").fill("étoile stone")
    expect(page.locator("li.entry .entry-toggle")).to_have_text(["Lamp 150"])
    expect(page.get_by_text(f"1 of {N} entries match")).to_be_visible()
    # only in the titles: the content's word finds nothing
    page.get_by_label("Search in").select_option(label="Title")
    expect(page.get_by_text(f"0 of {N} entries match")).to_be_visible()
    page.get_by_label("Search in").select_option(label="Content")
    expect(page.locator("li.entry .entry-toggle")).to_have_text(["Lamp 150"])

    # opening the row reads the entry whole: its form shows the content
    with page.expect_response(lambda r: r.url.endswith(f"{entries}/150")):
        page.get_by_role("button", name="Lamp 150", exact=True).click()
    content = page.get_by_label("Content", exact=True)
    expect(content).to_have_value("Under the quay, the ÉTOILE stone waits.")
    screenshot(page, "lorebook-lines-desktop")

    # edited and saved: its new words find it, its old ones no longer do
    content.fill("A lantern hangs over the harbour wall.")
    page.get_by_role("button", name="Save lorebook").click()
    expect(page.locator("#toast")).to_have_text("Lorebook saved")
    page.get_by_label("Search entries").fill("lantern")
    expect(page.locator("li.entry .entry-toggle")).to_have_text(["Lamp 150"])
    page.get_by_label("Search entries").fill("étoile")
    expect(page.get_by_text(f"0 of {N} entries match")).to_be_visible()
    page.get_by_label("Search entries").fill("beacon42 burns")
    expect(page.locator("li.entry .entry-toggle")).to_have_text(["Lamp 42"])

    # a phone: the same screen, nothing wider than it
    page.set_viewport_size({"width": 390, "height": 844})
    page.get_by_role("button", name="Lamp 42", exact=True).click()
    expect(page.get_by_label("Content", exact=True)).to_have_value(re.compile("^The beacon42"))
    overflow = page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0, overflow
    screenshot(page, "lorebook-lines-phone")
    # the book was never read whole; an entry only when its row opened
    assert f"lorebooks/{book}" not in asked, asked
    assert sorted(u for u in asked if u.startswith(f"{entries}/")) == [
        f"{entries}/150",
        f"{entries}/42",
    ], asked
