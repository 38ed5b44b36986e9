"""The page header's nav on a phone and a desktop. At 390x844 the links did not fit the header's
one row and scrolled sideways with no sign they did (Settings, where a new user adds a
connection, lay past the edge): there the header is now the brand and a "Menu" button that
drops every nav link as a panel over the page, closed by choosing a link, Escape (focus back on
the button), a tap outside and Menu again, the current screen's link marked. The header stays
one row (the chat's side panel opens under it). At 1280x720 nothing changes: the links sit in
the header and no Menu button shows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from ._pages import new_chat, open_chat, sized_pages
from ._site import Site
from .conftest import screenshot

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 720}

#: the nav's links (Admin shows only to an admin of a server with accounts) and where they go
LINKS = [
    ("Characters", "#/"),
    ("Groups", "#/groups"),
    ("Lorebooks", "#/lorebooks"),
    ("Personas", "#/personas"),
    ("Presets", "#/presets"),
    ("Regex", "#/regex"),
    ("Search", "#/search"),
    ("Settings", "#/settings"),
    ("Account", "#/account"),
]


@pytest.fixture
def sized(browser: Any, site: Site) -> Iterator[Any]:
    with sized_pages(browser, site) as make:
        yield make


def header_height(page: Page) -> float:
    box = page.locator("header.top").bounding_box()
    assert box is not None
    return box["height"]


def test_on_a_phone_every_nav_link_is_reached_through_the_menu(sized: Any) -> None:
    page = sized(PHONE)
    page.goto("/#/presets")
    expect(page.get_by_role("heading", name="Chat presets", level=1)).to_be_visible()
    menu = page.get_by_role("button", name="Menu", exact=True)
    nav = page.get_by_role("navigation")
    expect(menu).to_be_visible()
    expect(menu).to_have_attribute("aria-controls", "site-nav")
    expect(menu).to_have_attribute("aria-expanded", "false")
    for name, _ in LINKS:  # closed: no link shows, none reaches a screen reader
        expect(nav.get_by_role("link", name=name, exact=True)).to_be_hidden()
    assert header_height(page) < 60, "the header is more than one row"
    screenshot(page, "phone-nav-closed")

    menu.click()
    expect(menu).to_have_attribute("aria-expanded", "true")
    for name, _ in LINKS:
        expect(nav.get_by_role("link", name=name, exact=True)).to_be_visible()
    # the screen shown is marked, and the panel lies over the page, not in the header's row
    expect(nav.get_by_role("link", name="Presets")).to_have_attribute("aria-current", "page")
    expect(nav.get_by_role("link", name="Characters")).not_to_have_attribute("aria-current", "page")
    assert header_height(page) < 60, "the open menu pushed the header taller"
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    screenshot(page, "phone-nav-open")
    menu.click()  # Menu again closes it
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(nav).to_be_hidden()

    for name, target in LINKS:
        menu.click()
        nav.get_by_role("link", name=name, exact=True).click()
        page.wait_for_url(f"**/{target}")
        expect(menu).to_have_attribute("aria-expanded", "false")  # choosing a link closes it
        expect(nav).to_be_hidden()
        expect(page.locator("#view h1").first).to_be_visible()
        menu.click()
        link = nav.get_by_role("link", name=name, exact=True)
        expect(link).to_have_attribute("aria-current", "page")
        menu.click()


def test_escape_and_a_tap_outside_close_the_menu(sized: Any, site: Site) -> None:
    page = sized(PHONE)
    page.goto("/#/settings")
    expect(page.get_by_role("heading", name="Settings", level=1)).to_be_visible()
    menu = page.get_by_role("button", name="Menu", exact=True)
    nav = page.get_by_role("navigation")

    # keyboard: Enter opens, Tab goes into the panel, Escape closes it and focus is on Menu again
    menu.focus()
    page.keyboard.press("Enter")
    expect(menu).to_have_attribute("aria-expanded", "true")
    page.keyboard.press("Tab")
    expect(nav.get_by_role("link", name="Characters")).to_be_focused()
    page.keyboard.press("Escape")
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(nav).to_be_hidden()
    expect(menu).to_be_focused()
    # Tab past the panel's last control closes it: it does not linger over the page
    page.keyboard.press("Enter")
    nav.get_by_role("button", name="Dark/light").focus()
    page.keyboard.press("Tab")
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(nav).to_be_hidden()

    # a tap outside closes it, and only that: the character under the tap is not opened
    page.goto("/#/")
    mira = page.get_by_role("button", name="Chat with Mira")
    expect(mira).to_be_visible()
    menu.click()
    expect(nav).to_be_visible()
    mira.click()
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(nav).to_be_hidden()
    page.wait_for_timeout(500)  # long enough for a chat to have opened, had the tap gone through
    expect(page).to_have_url(f"{site.url}/#/")

    # the theme switch is in the menu too, and flips the theme
    theme = page.evaluate("document.documentElement.dataset.theme")
    menu.click()
    nav.get_by_role("button", name="Dark/light").click()
    flipped = "light" if theme == "dark" else "dark"
    expect(page.locator("html")).to_have_attribute("data-theme", flipped)
    screenshot(page, f"phone-nav-open-{flipped}")
    page.keyboard.press("Escape")
    screenshot(page, f"phone-nav-closed-{flipped}")


def test_the_chat_side_panel_opens_under_the_one_row_header(sized: Any, site: Site) -> None:
    page = sized(PHONE)
    open_chat(page, new_chat(site))
    page.get_by_role("button", name="Chat tools").click()
    side = page.get_by_role("complementary", name="Chat tools")
    expect(side).to_be_visible()
    panel = side.bounding_box()
    header = page.locator("header.top").bounding_box()
    assert panel is not None and header is not None
    assert header["y"] + header["height"] <= panel["y"], "the side panel covers the header"
    # the menu, opened over the side panel, lies on top of it
    page.get_by_role("button", name="Menu", exact=True).click()
    settings = page.get_by_role("navigation").get_by_role("link", name="Settings")
    expect(settings).to_be_visible()
    screenshot(page, "phone-nav-over-chat-tools")
    settings.click()
    page.wait_for_url("**/#/settings")
    screenshot(page, "phone-nav-from-chat")


def test_on_a_desktop_the_links_sit_in_the_header_and_no_menu_shows(sized: Any) -> None:
    page = sized(DESKTOP)
    page.goto("/#/lorebooks")
    expect(page.get_by_role("heading", name="Lorebooks", level=1)).to_be_visible()
    expect(page.get_by_role("button", name="Menu", exact=True)).to_be_hidden()
    nav = page.get_by_role("navigation")
    header = page.locator("header.top").bounding_box()
    assert header is not None
    for name, _ in LINKS:
        link = nav.get_by_role("link", name=name, exact=True)
        expect(link).to_be_visible()
        box = link.bounding_box()
        assert box is not None and header["y"] <= box["y"] < header["y"] + header["height"]
    assert header["height"] < 60, "the header is more than one row"
    expect(nav.get_by_role("link", name="Lorebooks")).to_have_attribute("aria-current", "page")
    screenshot(page, "desktop-nav")
    # a lorebook's editor marks the list it belongs to
    page.goto("/#/lorebook/nothing-here")
    expect(nav.get_by_role("link", name="Lorebooks")).to_have_attribute("aria-current", "true")
    page.get_by_role("button", name="Dark/light").click()
    page.goto("/#/settings")
    expect(page.get_by_role("heading", name="Settings", level=1)).to_be_visible()
    screenshot(page, "desktop-nav-other-theme")


def test_the_menu_button_speaks_the_pages_language(browser: Any, site: Site) -> None:
    context = browser.new_context(base_url=site.url, locale="zh-CN", viewport=PHONE)
    try:
        page = context.new_page()
        page.goto("/")
        page.get_by_role("button", name="菜单", exact=True).click()
        nav = page.get_by_role("navigation")
        expect(nav.get_by_role("link", name="设置")).to_be_visible()
        screenshot(page, "phone-nav-open-zh-Hans")
    finally:
        context.close()
