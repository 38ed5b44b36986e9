"""Two tabs on one account edit the same message: the first edit is saved, the second is
refused (the message changed since that tab read it) and offered a reload; nothing the first
tab wrote is overwritten, and after the reload the second tab edits the current text."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from ._pages import new_chat, open_chat, stored_messages
from ._site import Site
from .conftest import screenshot


def _start_edit(page: Page) -> Any:
    page.get_by_role("button", name="Edit message 1").click()
    area = page.get_by_role("textbox", name="Edit message")
    expect(area).to_be_visible()
    return area


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
