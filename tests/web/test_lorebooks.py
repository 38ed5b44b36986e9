"""The lorebook screens in a real browser: a book made, filled, searched and edited entry by
entry (a save sends the changed entries' fields, never the book), bound to a chat so its entry
reaches the prompt inspector and the model's request, renamed (the chat's binding follows),
exported as a download and deleted; the list's import (a taken name offers Replace), duplicate,
rename and "used by"; a 2,000-entry book that opens with a few dozen rows and no forms and
finds an entry by search at once; the phone layout."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Page, expect

from chat._server import Reply

from ._pages import new_chat, open_chat, send, turn
from ._site import Site
from .conftest import screenshot


def _stored(site: Site, ref: str) -> dict[str, Any]:
    record = site.call(site.tk.store.get_record("lorebook", ref, owner=site.tk.owner))
    return dict(record.data)


def _chat_book(site: Site, chat: str) -> Any:
    window = site.call(site.tk.store.load_chat_window(chat, last=1, owner=site.tk.owner))
    return (window.header.get("chat_metadata") or {}).get("world_info")


def _entry(page: Page, title: str) -> Any:
    return page.locator("li.entry").filter(has=page.get_by_role("button", name=title, exact=True))


def _add_entry(page: Page, title: str, keys: str, content: str) -> None:
    """Add an entry (it comes first, open) and fill it in."""
    before = page.locator("li.entry").count()
    page.get_by_role("button", name="Add entry").click()
    expect(page.locator("li.entry")).to_have_count(before + 1)
    row = page.locator("li.entry").first
    expect(row.get_by_label("Title", exact=True)).to_be_focused()
    row.get_by_label("Title", exact=True).fill(title)
    row.get_by_label("Keys", exact=True).fill(keys)
    row.get_by_label("Content", exact=True).fill(content)


def test_a_book_is_made_filled_bound_to_a_chat_renamed_exported_and_deleted(
    page: Page, site: Site, tmp_path: Path
) -> None:
    writes: list[str] = []
    page.on(
        "request",
        lambda r: (
            writes.append(f"{r.method} {r.url.split('//')[1].split('/', 1)[1]}")
            if r.method != "GET"
            else None
        ),
    )
    page.goto("/#/lorebooks")
    page.get_by_label("New lorebook name").fill("Harbour lore")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", name="Harbour lore")).to_be_visible()
    book = page.url.split("#/lorebook/")[1]
    expect(page.get_by_text("0 entries")).to_be_visible()

    # two entries: each opens ready to fill as it is added
    _add_entry(page, "Ferry", "ferry, boat", "The ferry leaves at dusk.")
    _add_entry(page, "Gulls", "gull", "Gulls circle the mast.")
    expect(page.get_by_text("2 entries have unsaved edits")).to_be_visible()
    writes.clear()
    page.get_by_role("button", name="Save lorebook").click()
    expect(page.locator("#toast")).to_have_text("Lorebook saved")
    expect(page.get_by_text("2 entries have unsaved edits")).to_have_count(0)
    # each changed entry's fields went alone: no whole-book write
    assert sorted(writes) == [
        f"PATCH lorebooks/{book}/entries/0",
        f"PATCH lorebooks/{book}/entries/1",
    ]
    entries = _stored(site, book)["entries"]
    assert entries["0"]["comment"] == "Ferry" and entries["0"]["key"] == ["ferry", "boat"]
    assert entries["1"]["content"] == "Gulls circle the mast."

    # search over keys, titles and content
    search = page.get_by_label("Search entries")
    search.fill("circle")
    expect(page.locator("li.entry")).to_have_count(1)
    expect(page.get_by_text("1 of 2 entries match")).to_be_visible()
    search.fill("boat")
    expect(page.locator("li.entry .entry-toggle")).to_have_text(["Ferry"])
    search.fill("")
    expect(page.locator("li.entry")).to_have_count(2)

    # duplicate one entry, then delete the copy
    _entry(page, "Gulls").get_by_role("button", name="Duplicate entry").click()
    expect(page.locator("#toast")).to_have_text("Entry duplicated")
    expect(page.locator("li.entry")).to_have_count(3)
    assert len(_stored(site, book)["entries"]) == 3
    copy = page.locator("li.entry").first  # the new entry comes first, open
    expect(copy).to_have_attribute("data-uid", "2")
    page.once("dialog", lambda d: d.accept())
    copy.get_by_role("button", name="Delete entry").click()
    expect(page.locator("li.entry")).to_have_count(2)
    assert sorted(_stored(site, book)["entries"]) == ["0", "1"]

    # switching an entry off is stored at once
    _entry(page, "Gulls").get_by_label("Enabled").uncheck()
    expect(_entry(page, "Gulls")).to_have_class(re.compile(r"\bdisabled\b"))
    assert _stored(site, book)["entries"]["1"]["disable"] is True

    # bind it to a chat (the chat screen's link names the chat)
    chat = new_chat(site)
    page.goto(f"/#/lorebook/{book}?chat={chat}")
    used_by = page.get_by_role("region", name="Used by")
    expect(used_by.get_by_label("Bind to")).to_have_value("chat")
    expect(used_by.get_by_label("Which")).to_have_value(chat)
    used_by.get_by_role("button", name="Bind").click()
    expect(used_by.locator(".bindings li")).to_have_count(1)
    expect(used_by.locator(".bindings li")).to_contain_text("Chat: Mira")
    assert _chat_book(site, chat) == "Harbour lore"
    # a character too, then not
    used_by.get_by_label("Bind to").select_option(label="A character")
    expect(used_by.get_by_label("Which")).to_contain_text("Mira")
    used_by.get_by_label("Which").select_option(label="Mira")
    used_by.get_by_role("button", name="Bind").click()
    expect(used_by.locator(".bindings li")).to_have_count(2)
    character = used_by.locator(".bindings li").filter(has_text="Character: Mira")
    character.get_by_role("button", name="Remove").click()
    expect(used_by.locator(".bindings li")).to_have_count(1)
    expect(used_by.locator(".bindings li")).to_contain_text("Chat: Mira")
    screenshot(page, "lorebook-editor")

    # the entry fires in the inspector, and reaches the model's request
    page.goto(f"/#/inspect/{chat}")
    page.wait_for_selector(".blocks")
    site.call(
        site.tk.store.append_message(
            chat, {"name": "Ada", "is_user": True, "mes": "Is the ferry late?"}, owner=site.tk.owner
        )
    )
    page.reload()
    expect(page.locator(".lore li")).to_contain_text("Ferry")
    expect(page.locator(".blocks")).to_contain_text("The ferry leaves at dusk.")
    site.upstream.script(Reply(text="At dusk, as ever.", pace=0.01))
    open_chat(page, chat)
    turn(page, lambda: send(page, "When does the boat go?"))
    assert "The ferry leaves at dusk." in json.dumps(site.upstream.requests[-1].body)
    assert "Gulls circle" not in json.dumps(site.upstream.requests[-1].body)  # switched off

    # rename: the chat's binding follows the new name
    page.goto(f"/#/lorebook/{book}")
    page.get_by_role("button", name="Rename").click()
    page.get_by_label("New name").fill("Coast lore")
    page.get_by_role("button", name="Save name").click()
    expect(page.get_by_role("heading", name="Coast lore")).to_be_visible()
    assert _chat_book(site, chat) == "Coast lore"

    # export: SillyTavern's world-info JSON, as a download
    with page.expect_download() as download:
        page.get_by_role("link", name="Export").click()
    assert download.value.suggested_filename == "Coast lore.json"
    saved = tmp_path / "export.json"
    download.value.save_as(saved)
    exported = json.loads(saved.read_text())
    assert {e["comment"] for e in exported["entries"].values()} == {"Ferry", "Gulls"}

    # delete: back on the list, and the chat is bound to nothing
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("heading", name="Lorebooks")).to_be_visible()
    expect(page.get_by_role("link", name="Coast lore")).to_have_count(0)
    assert _chat_book(site, chat) is None


def test_the_list_imports_duplicates_renames_and_shows_where_books_are_bound(
    page: Page, site: Site, tmp_path: Path
) -> None:
    world = {
        "entries": {
            "0": {"uid": 0, "key": ["tide"], "content": "The tide turns.", "comment": "Tide"}
        }
    }
    file = tmp_path / "Tides.json"
    file.write_text(json.dumps(world))
    page.goto("/#/lorebooks")
    page.get_by_label("Import lorebooks").set_input_files(str(file))
    expect(page.locator("#toast")).to_have_text("Imported Tides")
    row = page.locator("li.book").filter(has=page.get_by_role("link", name="Tides", exact=True))
    expect(row).to_contain_text("Bound nowhere")

    # the same name with other entries: the alert offers Replace
    world["entries"]["0"]["content"] = "The tide is out."
    file.write_text(json.dumps(world))
    page.get_by_label("Import lorebooks").set_input_files(str(file))
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("Tides")
    alert.get_by_role("button", name="Replace").click()
    # (the first import's toast may still read the same: wait for the store itself)
    for _ in range(100):
        if _stored(site, "Tides")["entries"]["0"]["content"] == "The tide is out.":
            break
        page.wait_for_timeout(50)
    assert _stored(site, "Tides")["entries"]["0"]["content"] == "The tide is out."
    expect(page.locator("#toast")).to_have_text("Imported Tides")

    row.get_by_role("button", name="Duplicate").click()
    copied = page.locator("li.book").filter(has=page.get_by_role("link", name="Tides (copy)"))
    expect(copied).to_have_count(1)
    copy = page.locator(f'li.book[data-id="{copied.get_attribute("data-id")}"]')
    copy.get_by_role("button", name="Rename").click()
    copy.get_by_label("New name").fill("Tides")
    copy.get_by_role("button", name="Save name").click()
    expect(page.get_by_role("alert").last).to_contain_text(
        "A lorebook named “Tides” exists already."
    )
    copy.get_by_label("New name").fill("Neap tides")
    copy.get_by_label("New name").press("Enter")
    expect(page.get_by_role("link", name="Neap tides")).to_be_visible()

    # bound everywhere from its page: the list says so
    page.get_by_role("link", name="Neap tides").click()
    page.get_by_role("region", name="Used by").get_by_role("button", name="Bind").click()
    expect(page.get_by_role("region", name="Used by")).to_contain_text("Every chat (global)")
    page.get_by_role("link", name="All lorebooks").click()
    neap = page.locator("li.book").filter(has=page.get_by_role("link", name="Neap tides"))
    expect(neap).to_contain_text("Used by: Every chat (global)")
    screenshot(page, "lorebooks-list")
    page.get_by_label("Filter lorebooks").fill("neap")
    expect(page.locator("li.book")).to_have_count(1)

    page.once("dialog", lambda d: d.accept())
    neap.get_by_role("button", name="Delete").click()
    expect(page.locator("#toast")).to_have_text("Deleted Neap tides")
    assert "Neap tides" not in site.call(site.tk.settings()).world_info.global_books


def _big_book(site: Site, n: int = 2000) -> str:
    entries = {
        str(i): {
            "uid": i,
            "key": [f"key{i}", "common"],
            "comment": f"Entry {i}",
            "content": f"Lore number {i}: the marker{i} stone. " + "Filler words. " * 30,
            "order": 100 + i % 7,
        }
        for i in range(n)
    }
    found = site.call(
        site.tk.library.import_bytes(json.dumps({"entries": entries}).encode(), source="Atlas.json")
    )
    return found[0].id


def test_a_two_thousand_entry_book_opens_small_and_finds_an_entry_fast(
    page: Page, site: Site
) -> None:
    book = _big_book(site)
    started = time.perf_counter()
    page.goto(f"/#/lorebook/{book}")
    expect(page.get_by_text("2000 entries")).to_be_visible()
    opened = time.perf_counter() - started
    # a page of rows, no forms: an Enabled switch a row and the page's own few controls
    controls = page.locator("main input, main textarea, main select").count()
    rows = page.locator("li.entry").count()
    print(f"\n2,000-entry book: shown in {opened:.2f}s, {rows} rows, {controls} form controls")
    assert rows == 50 and controls < 80, (rows, controls)
    assert opened < 5

    started = time.perf_counter()
    page.get_by_label("Search entries").fill("marker1234")
    expect(page.locator("li.entry")).to_have_count(1)
    found = time.perf_counter() - started
    print(f"search over 2,000 entries: {found:.2f}s")
    assert found < 2
    expect(page.locator("li.entry .entry-toggle")).to_have_text("Entry 1234")
    page.get_by_role("button", name="Entry 1234").click()
    expect(page.get_by_label("Content", exact=True)).to_have_value(
        "Lore number 1234: the marker1234 stone. " + "Filler words. " * 30
    )
    page.get_by_role("button", name="Dark/light").click()
    screenshot(page, "lorebook-big-dark")
    page.get_by_label("Order", exact=True).fill("900")
    page.get_by_role("button", name="Save lorebook").click()
    expect(page.locator("#toast")).to_have_text("Lorebook saved")
    assert _stored(site, book)["entries"]["1234"]["order"] == 900

    # "show more" pages through the rest; a sort puts the highest order first
    page.get_by_label("Search entries").fill("")
    expect(page.locator("li.entry")).to_have_count(50)
    page.get_by_role("button", name="Show 50 more (1950 not shown)").click()
    expect(page.locator("li.entry")).to_have_count(100)
    page.get_by_label("Sort by").select_option(label="Order, highest first")
    expect(page.locator("li.entry .entry-toggle").first).to_have_text("Entry 1234")


def test_the_phone_layout(browser: Browser, site: Site) -> None:
    context = browser.new_context(
        base_url=site.url, viewport={"width": 390, "height": 844}, is_mobile=True
    )
    try:
        page = context.new_page()
        page.set_default_timeout(10_000)
        page.goto("/#/lorebooks")
        page.get_by_label("New lorebook name").fill("Pocket lore")
        page.get_by_role("button", name="Create").click()
        expect(page.get_by_role("heading", name="Pocket lore")).to_be_visible()
        _add_entry(page, "Lantern", "lantern, lamp", "A brass lantern.")
        page.get_by_role("button", name="Save lorebook").click()
        expect(page.locator("#toast")).to_have_text("Lorebook saved")
        # nothing wider than the screen
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, width
        screenshot(page, "lorebook-editor-phone")
        page.goto("/#/lorebooks")
        expect(page.get_by_role("link", name="Pocket lore")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        screenshot(page, "lorebooks-list-phone")
    finally:
        context.close()
