"""Two tabs on one account edit the same message: the first edit is saved, the second is
refused (the message changed since that tab read it) and offered a reload; nothing the first
tab wrote is overwritten, and after the reload the second tab edits the current text."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from playwright.sync_api import Page, expect

from tavernkit.models.chat import Message

from ._pages import new_chat, open_chat, stored_messages
from ._site import Site
from .conftest import screenshot


def _start_edit(page: Page) -> Any:
    page.get_by_role("button", name="Edit message 1").click()
    area = page.get_by_role("textbox", name="Edit message")
    expect(area).to_be_visible()
    return area


def _wait_until(check: Callable[[], bool], seconds: float = 10.0) -> None:
    """Wait for a write the page makes in the background (a save's request) to be stored."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "never stored"
        time.sleep(0.05)


def _second_tab(browser: Any, site: Site) -> Page:
    other: Page = browser.new_context(base_url=site.url).new_page()
    other.set_default_timeout(10_000)
    return other


def test_the_second_tab_is_refused_and_offered_a_reload(
    page: Page, browser: Any, site: Site
) -> None:
    chat = new_chat(site)
    other = _second_tab(browser, site)
    try:
        for tab in (page, other):
            open_chat(tab, chat)
        first, second = _start_edit(page), _start_edit(other)  # both read the greeting
        first.fill("Edited in the first tab.")
        page.get_by_role("button", name="Save", exact=True).click()
        expect(page.locator(".log .message").first).to_contain_text("Edited in the first tab.")

        second.fill("Edited in the second tab.")
        other.get_by_role("button", name="Save", exact=True).click()
        alert = other.get_by_role("alert").filter(has_text="changed in another tab")
        expect(alert).to_be_visible()
        expect(second).to_have_value("Edited in the second tab.")  # the user's text is kept
        assert stored_messages(site, chat)[0]["mes"] == "Edited in the first tab."
        for name, size in (("desktop", (1280, 720)), ("phone", (390, 844))):
            other.set_viewport_size({"width": size[0], "height": size[1]})
            screenshot(other, f"concurrent-edit-refused-{name}")

        alert.get_by_role("button", name="Reload message").click()
        expect(other.locator(".log .message").first).to_contain_text("Edited in the first tab.")
        expect(alert).to_have_count(0)
        # read again, the second tab's edit goes through
        _start_edit(other).fill("Then the second tab.")
        other.get_by_role("button", name="Save", exact=True).click()
        expect(other.locator(".log .message").first).to_contain_text("Then the second tab.")
        assert stored_messages(site, chat)[0]["mes"] == "Then the second tab."
    finally:
        other.context.close()


def _stored_description(site: Site, name: str) -> str:
    record = site.call(site.tk.store.get_record("character", name))
    return str(record.data["data"]["description"])


def test_a_card_saved_in_another_tab_is_not_overwritten(
    page: Page, browser: Any, site: Site
) -> None:
    other = _second_tab(browser, site)
    try:
        for tab in (page, other):
            tab.goto("/#/character/Mira")
            expect(tab.get_by_label("Description", exact=True)).to_be_visible()
        page.get_by_label("Description", exact=True).fill("Written in the first tab.")
        page.get_by_role("button", name="Save", exact=True).click()
        expect(page.get_by_role("status").filter(has_text="Saved")).to_be_visible()
        assert _stored_description(site, "Mira") == "Written in the first tab."

        other.get_by_label("Description", exact=True).fill("Written in the second tab.")
        other.get_by_role("button", name="Save", exact=True).click()
        alert = other.get_by_role("alert").filter(has_text="changed in another tab")
        expect(alert).to_be_visible()
        expect(other.get_by_label("Description", exact=True)).to_have_value(
            "Written in the second tab."
        )
        assert _stored_description(site, "Mira") == "Written in the first tab."
        screenshot(other, "concurrent-edit-card-refused-desktop")
        alert.get_by_role("button", name="Reload character").click()
        expect(other.get_by_label("Description", exact=True)).to_have_value(
            "Written in the first tab."
        )
    finally:
        other.context.close()


def _book_with_entry(site: Site) -> str:
    async def make() -> str:
        book = {"name": "Tides", "entries": {}}
        ref = await site.tk.store.put("lorebook", book)
        entry = {"uid": 0, "key": ["tide"], "comment": "Spring tide", "content": "Twice a month."}
        await site.tk.store.put(
            "lorebook", {**book, "entries": {"0": entry}}, id=ref.id, name="Tides"
        )
        return ref.id

    return site.call(make())


def _entry_content(site: Site, book: str) -> str:
    record = site.call(site.tk.store.get_record("lorebook", book))
    return str(record.data["entries"]["0"]["content"])


def test_a_lorebook_entry_saved_in_another_tab_is_not_overwritten(
    page: Page, browser: Any, site: Site
) -> None:
    book = _book_with_entry(site)
    other = _second_tab(browser, site)
    try:
        contents = []
        for tab in (page, other):
            tab.goto(f"/#/lorebook/{book}")
            tab.get_by_role("button", name="Spring tide", exact=True).click()
            contents.append(tab.locator("li.entry").get_by_label("Content", exact=True))
            expect(contents[-1]).to_have_value("Twice a month.")
        page.wait_for_load_state("networkidle")  # each form read its entry's revision
        other.wait_for_load_state("networkidle")
        contents[0].fill("First tab's tide.")
        page.get_by_role("button", name="Save lorebook").click()
        expect(page.get_by_role("status").filter(has_text="Lorebook saved")).to_be_visible()
        assert _entry_content(site, book) == "First tab's tide."

        contents[1].fill("Second tab's tide.")
        other.get_by_role("button", name="Save lorebook").click()
        alert = other.get_by_role("alert").filter(has_text="changed in another tab")
        expect(alert).to_be_visible()
        expect(contents[1]).to_have_value("Second tab's tide.")
        assert _entry_content(site, book) == "First tab's tide."
        screenshot(other, "concurrent-edit-entry-refused-desktop")
        alert.get_by_role("button", name="Reload entry").click()
        expect(other.locator("li.entry").get_by_label("Content", exact=True)).to_have_value(
            "First tab's tide."
        )
    finally:
        other.context.close()


def test_a_persona_saved_in_another_tab_is_not_overwritten(
    page: Page, browser: Any, site: Site
) -> None:
    ref = site.call(site.tk.store.put("persona", {"name": "Wren", "description": "A courier."}))
    other = _second_tab(browser, site)

    def stored() -> str:
        record = site.call(site.tk.store.get_record("persona", ref.id))
        return str(record.data["description"])

    try:
        for tab in (page, other):
            tab.goto(f"/#/personas/{ref.id}")
            expect(tab.get_by_label("Description", exact=True)).to_have_value("A courier.")
        page.get_by_label("Description", exact=True).fill("A courier, first tab.")
        page.get_by_role("button", name="Save persona").click()
        expect(page.locator("#toast")).to_have_text("Persona saved")
        assert stored() == "A courier, first tab."

        other.get_by_label("Description", exact=True).fill("A courier, second tab.")
        other.get_by_role("button", name="Save persona").click()
        alert = other.get_by_role("alert").filter(has_text="changed in another tab")
        expect(alert).to_be_visible()
        assert stored() == "A courier, first tab."
        alert.get_by_role("button", name="Reload persona").click()
        expect(other.get_by_label("Description", exact=True)).to_have_value("A courier, first tab.")
        # read again, the second tab saves, and saves once more on its own revision
        for text in ("A courier, second tab.", "A courier, again."):
            other.get_by_label("Description", exact=True).fill(text)
            other.get_by_role("button", name="Save persona").click()
            _wait_until(lambda text=text: stored() == text)
            expect(other.locator("#toast")).to_have_text("Persona saved")
            expect(other.get_by_role("alert")).to_have_count(0)
    finally:
        other.context.close()


def test_a_delete_from_a_stale_list_keeps_the_message_that_moved_up(
    page: Page, browser: Any, site: Site
) -> None:
    chat = new_chat(site)
    for text in ("First.", "Second."):
        site.call(site.tk.store.append_message(chat, Message.new("Ada", text, is_user=True)))
    other = _second_tab(browser, site)
    try:
        for tab in (page, other):
            tab.on("dialog", lambda dialog: dialog.accept())
            open_chat(tab, chat)
            expect(tab.locator(".log .message")).to_have_count(3)
        page.get_by_role("button", name="Delete message 2").click()
        expect(page.locator(".log .message")).to_have_count(2)
        other.get_by_role("button", name="Delete message 2").click()  # it still shows First
        alert = other.get_by_role("alert").filter(has_text="so it was not deleted")
        expect(alert).to_be_visible()
        assert [m["mes"] for m in stored_messages(site, chat)][1:] == ["Second."]
        alert.get_by_role("button", name="Reload message").click()
        expect(other.locator(".log .message")).to_have_count(2)
        expect(other.locator(".log .message").last).to_contain_text("Second.")
    finally:
        other.context.close()


def test_a_text_preset_saved_in_another_tab_is_not_overwritten(
    page: Page, browser: Any, site: Site
) -> None:
    ref = site.call(site.tk.store.put("textgen_preset", {"name": "Steady", "temp": 1.0}))
    other = _second_tab(browser, site)

    def stored_temp() -> float:
        return float(site.call(site.tk.store.get_record("textgen_preset", ref.id)).data["temp"])

    try:
        for tab in (page, other):
            tab.goto(f"/#/textgen/{ref.id}")
            expect(tab.get_by_label("Temperature", exact=True)).to_have_value("1")
        page.get_by_label("Temperature", exact=True).fill("0.5")
        page.get_by_role("button", name="Save preset").click()
        _wait_until(lambda: stored_temp() == 0.5)
        # saved twice from one tab: the second save names the first one's revision
        page.get_by_label("Temperature", exact=True).fill("0.6")
        page.get_by_role("button", name="Save preset").click()
        _wait_until(lambda: stored_temp() == 0.6)

        other.get_by_label("Temperature", exact=True).fill("1.4")
        other.get_by_role("button", name="Save preset").click()
        alert = other.get_by_role("alert").filter(has_text="changed in another tab")
        expect(alert).to_be_visible()
        assert stored_temp() == 0.6
        expect(alert.get_by_role("button", name="Reload preset")).to_be_visible()
        alert.get_by_role("button", name="Reload preset").click()
        expect(other.get_by_label("Temperature", exact=True)).to_have_value("0.6")
    finally:
        other.context.close()


def test_a_hide_in_a_tab_showing_an_old_message_is_refused(
    page: Page, browser: Any, site: Site
) -> None:
    chat = new_chat(site)
    other = _second_tab(browser, site)
    try:
        for tab in (page, other):
            open_chat(tab, chat)
        _start_edit(page).fill("Edited in the first tab.")
        page.get_by_role("button", name="Save", exact=True).click()
        expect(page.locator(".log .message").first).to_contain_text("Edited in the first tab.")

        other.get_by_role("button", name="Hide message 1", exact=True).click()
        alert = other.get_by_role("alert").filter(has_text="changed in another tab")
        expect(alert).to_contain_text("so it was not changed")
        assert not stored_messages(site, chat)[0].get("is_system")
        alert.get_by_role("button", name="Reload message").click()
        expect(other.locator(".log .message").first).to_contain_text("Edited in the first tab.")
        other.get_by_role("button", name="Hide message 1", exact=True).click()
        expect(other.get_by_role("button", name="Unhide message 1", exact=True)).to_be_visible()
        assert stored_messages(site, chat)[0]["is_system"] is True
    finally:
        other.context.close()
