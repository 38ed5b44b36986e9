"""The second UX pass, on a phone and a desktop: a character without a picture (a JSON card)
shows its initial on the grid, in its chat and in its editor without the browser asking for a
missing image (each such request logged a 404 console error), while a PNG card shows its own;
on a phone the chat's top row names who the chat is with; a toast on a phone sits at the
bottom (above the chat's composer), clear of the header and toolbar, and a tap puts it away."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tavernkit.formats.cards import card_to_png
from tavernkit.groups.records import create_group
from tavernkit.models.character import Character
from tavernkit.models.group import ActivationStrategy

from ._pages import new_chat, open_chat, sized_pages
from ._site import Site
from .conftest import SCREENSHOTS, screenshot

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 720}


@pytest.fixture
def sized(browser: Any, site: Site) -> Iterator[Any]:
    """``sized(viewport)``: a fresh English page of that size."""
    with sized_pages(browser, site) as make:
        yield make


class Failures:
    """What a page logged as errors and which picture requests failed or were refused."""

    def __init__(self, page: Page) -> None:
        self.console: list[str] = []
        self.pictures: list[str] = []
        page.on("console", self._console)
        page.on("response", self._response)
        page.on("requestfailed", lambda request: self.pictures.append(f"failed {request.url}"))

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.console.append(message.text)

    def _response(self, response: Any) -> None:
        if response.status >= 400 and ("/avatar" in response.url or "/thumbnail" in response.url):
            self.pictures.append(f"{response.status} {response.url}")


def add_nell(site: Site) -> str:
    """Nell, a PNG card (with its image); her id."""
    known = {c.name: c.id for c in site.call(site.tk.store.list("character"))}
    if "Nell" not in known:
        png = card_to_png(Character.create(name="Nell", first_mes="Hello from the lighthouse."))
        return site.call(site.tk.library.import_bytes(png, source="nell.png"))[0].id
    return known["Nell"]


def character_id(site: Site, name: str) -> str:
    return next(c.id for c in site.call(site.tk.store.list("character")) if c.name == name)


def middle(box: Any) -> float:
    return float(box["y"] + box["height"] / 2)


def loaded(image: Any) -> None:
    expect(image).to_have_js_property("complete", True)
    assert image.evaluate("(img) => img.naturalWidth") > 0


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_json_card_shows_its_initial_without_asking_for_a_missing_picture(
    sized: Any, site: Site, viewport: dict[str, int]
) -> None:
    size = "phone" if viewport is PHONE else "desktop"
    nell = add_nell(site)
    page = sized(viewport)
    failures = Failures(page)

    # the grid: Mira (a JSON card) by her initial, Nell by her own picture
    page.goto("/")
    mira_tile = page.get_by_role("button", name="Chat with Mira")
    expect(mira_tile.locator(".initial")).to_have_text("M")
    expect(mira_tile.locator("img")).to_have_count(0)
    loaded(page.get_by_role("button", name="Chat with Nell").locator("img"))
    screenshot(page, f"ux2-grid-{size}")

    # Mira's chat: her messages carry her initial
    mira_tile.click()
    expect(page.locator(".log .message").first).to_be_visible()
    mira_says = page.locator(".log .message:not(.user)").first
    expect(mira_says.locator(".avatar.initial")).to_have_text("M")
    expect(page.locator(".log img.avatar")).to_have_count(0)
    screenshot(page, f"ux2-chat-json-{size}")

    # Nell's chat: her own picture
    chat = site.call(site.tk.chats.new_chat("Nell")).id
    open_chat(page, chat)
    loaded(page.locator(".log .message img.avatar").first)

    # the editor: Mira's initial, Nell's picture
    page.goto(f"/#/character/{character_id(site, 'Mira')}")
    expect(page.locator(".avatar-frame .initial")).to_have_text("M")
    expect(page.locator(".avatar-frame img")).to_have_count(0)
    screenshot(page, f"ux2-editor-json-{size}")
    page.goto(f"/#/character/{nell}")
    loaded(page.locator(".avatar-frame img"))

    page.goto("/")  # back to the grid: still no request for a missing picture
    expect(mira_tile.locator(".initial")).to_be_visible()
    assert failures.pictures == []
    assert [text for text in failures.console if "404" in text] == []


def test_a_json_card_given_a_picture_in_the_editor_shows_it_on_the_grid(
    sized: Any, site: Site
) -> None:
    page = sized(DESKTOP)
    failures = Failures(page)
    site.call(
        site.tk.library.import_bytes(
            Character.create(name="Orla", first_mes="Hi.").model_dump_json().encode(),
            source="orla.json",
        )
    )
    page.goto(f"/#/character/{character_id(site, 'Orla')}")
    expect(page.locator(".avatar-frame .initial")).to_have_text("O")
    png = card_to_png(Character.create(name="Picture"))
    page.locator("input[type=file]").first.set_input_files(
        {"name": "orla.png", "mimeType": "image/png", "buffer": png}
    )
    # the cropper always opens once the browser has read the picture (asynchronously)
    page.get_by_role("button", name="Use this avatar").click()
    expect(page.locator("#toast")).to_have_text("Avatar saved")
    # the editor shows the saved picture first (leaving while it loads cancels its request,
    # which the page would log as a failed picture)
    loaded(page.locator(".avatar-frame img"))
    page.goto("/")
    loaded(page.get_by_role("button", name="Chat with Orla").locator("img"))
    assert failures.pictures == []


def test_on_a_phone_the_chat_names_who_it_is_with_on_the_toolbar_row(
    sized: Any, site: Site
) -> None:
    phone = sized(PHONE)
    chat = new_chat(site)
    open_chat(phone, chat)
    who = phone.locator(".chat-who")
    expect(who).to_be_visible()
    expect(who).to_have_text("MMira")  # the initial, then the name
    tools = phone.get_by_role("button", name="Chat tools")
    expect(tools).to_be_visible()
    who_box, tools_box = who.bounding_box(), tools.bounding_box()
    assert who_box is not None and tools_box is not None
    # one row: side by side, not stacked
    assert abs(middle(who_box) - middle(tools_box)) < 6
    assert who_box["x"] + who_box["width"] <= tools_box["x"] + 1
    assert phone.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot(phone, "ux2-chat-who-phone")
    # the toolbar scrolls sideways beside the name, which stays in view
    last = phone.get_by_role("button", name="Delete messages")
    last.scroll_into_view_if_needed()
    last_box, still = last.bounding_box(), who.bounding_box()
    assert last_box is not None and last_box["x"] + last_box["width"] <= PHONE["width"]
    assert still == who_box

    # a group's chat: the group's name
    add_nell(site)
    site.call(
        create_group(
            site.tk.store,
            "Lighthouse crew",
            ["Mira", "Nell"],
            owner=site.tk.owner,
            created_ms=int(time.time() * 1000),
            activation_strategy=int(ActivationStrategy.LIST),
        )
    )
    group_chat = site.call(site.tk.chats.new_group_chat("Lighthouse crew")).id
    open_chat(phone, group_chat)
    expect(phone.locator(".chat-who")).to_have_text("LLighthouse crew")
    screenshot(phone, "ux2-group-who-phone")

    # a desktop names them in the side panel: no second name above the messages
    desktop = sized(DESKTOP)
    open_chat(desktop, chat)
    expect(desktop.locator(".chat-who")).to_be_hidden()
    screenshot(desktop, "ux2-chat-desktop")


def test_a_toast_on_a_phone_sits_above_the_composer_and_goes_on_a_tap(
    sized: Any, site: Site
) -> None:
    page = sized(PHONE)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    chat = new_chat(site)
    open_chat(page, chat)
    page.locator(".log .message").first.get_by_role("button", name="Copy").click()
    toast = page.get_by_role("status").filter(has_text="Message copied")
    expect(toast).to_be_visible()
    expect(page.locator("#toast")).to_have_attribute("aria-live", "polite")
    expect(page.locator("#toast")).to_have_css("opacity", "1")
    page.screenshot(path=str(SCREENSHOTS / "ux2-toast-chat-phone.png"))  # the screen as seen
    box = toast.bounding_box()
    header = page.locator("header").first.bounding_box()
    toolbar = page.get_by_role("button", name="Chat tools").bounding_box()
    composer = page.locator(".composer").bounding_box()
    assert box and header and toolbar and composer
    # clear of the header and the toolbar, above the composer's field and buttons
    assert box["y"] >= toolbar["y"] + toolbar["height"]
    assert box["y"] + box["height"] <= composer["y"] + 1
    toast.click()
    expect(page.locator("#toast")).not_to_have_class("shown")
    expect(page.locator("#toast")).to_have_css("opacity", "0")

    # the character editor: at the bottom, above its floating Save button
    page.goto(f"/#/character/{character_id(site, 'Mira')}")
    save = page.get_by_role("button", name="Save", exact=True)
    save.click()
    expect(page.get_by_role("status").filter(has_text="Saved")).to_be_visible()
    expect(page.locator("#toast")).to_have_css("opacity", "1")
    page.screenshot(path=str(SCREENSHOTS / "ux2-toast-editor-phone.png"))  # the screen as seen
    box = page.locator("#toast").bounding_box()
    save_box = save.bounding_box()
    assert box and save_box and box["y"] > PHONE["height"] / 2
    assert box["y"] + box["height"] <= save_box["y"] + 1


def test_a_toast_on_a_desktop_stays_at_the_top_right(sized: Any, site: Site) -> None:
    page = sized(DESKTOP)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    open_chat(page, new_chat(site))
    page.locator(".log .message").first.get_by_role("button", name="Copy").click()
    expect(page.get_by_role("status").filter(has_text="Message copied")).to_be_visible()
    box = page.locator("#toast").bounding_box()
    assert box and box["y"] < DESKTOP["height"] / 3 and box["x"] > DESKTOP["width"] / 2
    screenshot(page, "ux2-toast-desktop")


def test_a_group_with_a_json_card_member_asks_for_no_missing_picture(
    sized: Any, site: Site
) -> None:
    add_nell(site)
    if "Ferry crew" not in {g.name for g in site.call(site.tk.store.list("group"))}:
        site.call(
            create_group(
                site.tk.store,
                "Ferry crew",
                ["Mira", "Nell"],
                owner=site.tk.owner,
                created_ms=int(time.time() * 1000),
                activation_strategy=int(ActivationStrategy.LIST),
            )
        )
    chat = site.call(site.tk.chats.new_group_chat("Ferry crew")).id
    page = sized(DESKTOP)
    failures = Failures(page)

    page.goto("/#/groups")
    crew = page.locator(".group-item").filter(has_text="Ferry crew")
    expect(crew.locator(".avatar.initial")).to_have_text("M")
    loaded(crew.locator("img.avatar"))

    crew.get_by_role("link", name="Ferry crew").click()
    members = page.get_by_role("list", name="Members")
    expect(members.locator(".avatar.initial")).to_have_text("M")
    loaded(members.locator("img.avatar"))
    screenshot(page, "ux2-group-editor-desktop")

    open_chat(page, chat)
    expect(page.locator(".log .message .avatar.initial").first).to_have_text("M")
    loaded(page.locator(".log .message img.avatar").first)
    assert failures.pictures == []
    assert [text for text in failures.console if "404" in text] == []
