"""A SillyTavern user's first walk through the UI, on a phone and a desktop: what was broken,
confusing or a dead end on that walk, asserted fixed (the presets list that could not make a
preset, the chat variables' unlabelled inputs running out of the side panel, the prompt
inspector's table wider than a phone)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from ._pages import new_chat, open_chat, sized_pages
from ._site import Site
from .conftest import screenshot

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 720}


@pytest.fixture
def sized(browser: Any, site: Site) -> Iterator[Any]:
    """``sized(viewport)``: a fresh English page of that size (CSP bypassed for evaluate)."""
    with sized_pages(browser, site, bypass_csp=True) as make:
        yield make


def _page_width(page: Page) -> tuple[int, int]:
    width, inner = page.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
    return int(width), int(inner)


def test_the_presets_screen_makes_a_chat_preset_when_there_is_none(sized: Any, site: Site) -> None:
    page = sized(PHONE)
    page.goto("/#/presets")
    expect(page.get_by_text("No chat presets yet")).to_be_visible()
    screenshot(page, "ux-presets-empty-phone")

    page.get_by_label("New chat preset name").fill("Evening")
    page.get_by_role("button", name="New chat preset").click()
    expect(page).to_have_url(re.compile("#/preset/"))
    stored = site.call(site.tk.store.list("chat_preset", owner=site.tk.owner))
    names = {info.name for info in stored}
    assert "Evening" in names

    page.goto("/#/presets")
    expect(page.get_by_role("list", name="Chat presets").get_by_role("link")).to_have_text(
        ["Evening"]
    )
    expect(page.get_by_text("No chat presets yet")).to_have_count(0)


def test_a_text_preset_is_named_in_a_labelled_field(sized: Any, site: Site) -> None:
    page = sized(DESKTOP)
    page.goto("/#/presets")
    page.get_by_label("New text preset name").fill("Night")
    page.get_by_role("button", name="New text preset").click()
    expect(page).to_have_url(re.compile("#/textgen/"))
    screenshot(page, "ux-textgen-made-desktop")


def test_chat_variables_are_labelled_and_stay_inside_the_side_panel(sized: Any, site: Site) -> None:
    page = sized(DESKTOP)
    open_chat(page, new_chat(site))
    side = page.get_by_role("complementary", name="Chat tools")
    side.locator("summary", has_text="Chat variables").click()
    name, value = side.get_by_label("Variable name"), side.get_by_label("Variable value")
    panel = side.get_by_role("region", name="Chat variables").bounding_box()
    assert panel is not None
    for control in (name, value, side.get_by_role("button", name="Set", exact=True)):
        box = control.bounding_box()
        assert box is not None and box["x"] + box["width"] <= panel["x"] + panel["width"] + 0.5
    name.fill("mood")
    value.fill("calm")
    side.get_by_role("button", name="Set", exact=True).click()
    expect(side.get_by_role("region", name="Chat variables").get_by_text("mood")).to_be_visible()
    screenshot(page, "ux-chat-variables-desktop")


def test_the_prompt_inspector_fits_a_phone(sized: Any, site: Site) -> None:
    page = sized(PHONE)
    page.goto(f"/#/inspect/{new_chat(site)}")
    expect(page.locator("table.blocks tbody tr").first).to_be_visible()
    width, inner = _page_width(page)
    assert width <= inner, f"the page is {width} px wide on a {inner} px screen"
    content = page.locator("table.blocks tbody tr").first.locator("td").last.bounding_box()
    assert content is not None and content["width"] > inner / 2  # readable, not one letter wide
    screenshot(page, "ux-inspector-phone")


def test_the_chat_toolbar_keeps_to_one_row_on_a_phone(sized: Any, site: Site) -> None:
    page = sized(PHONE)
    open_chat(page, new_chat(site))
    toolbar = page.locator(".chat-toolbar")
    names = ["Chat tools", "Chat tree", "Delete messages"]
    tops = set()
    for name in names:
        # the row scrolls sideways (it shares the row with who the chat is with)
        control = toolbar.get_by_role("button", name=name)
        control.scroll_into_view_if_needed()
        box = control.bounding_box()
        assert box is not None and box["x"] + box["width"] <= PHONE["width"]
        tops.add(round(box["y"]))
    assert len(tops) == 1, f"the toolbar's buttons are on {len(tops)} rows"
    width, inner = _page_width(page)
    assert width <= inner
    screenshot(page, "ux-chat-toolbar-phone")


def test_no_quick_reply_sets_points_to_the_import_in_the_browser(sized: Any, site: Site) -> None:
    page = sized(DESKTOP)
    open_chat(page, new_chat(site))
    side = page.get_by_role("complementary", name="Chat tools")
    side.locator("summary", has_text="Quick reply sets").click()
    hint = side.get_by_text("No Quick Reply sets yet")
    expect(hint).to_contain_text("drop a set's .json file on the Characters screen")
    expect(side.get_by_text("tavernkit import")).to_have_count(0)
    hint.get_by_role("link", name="Characters screen").click()
    expect(page.get_by_role("button", name="choose files")).to_be_visible()


def test_a_new_presets_name_spans_the_connection_panel_on_a_phone(sized: Any, site: Site) -> None:
    page = sized(PHONE)
    open_chat(page, new_chat(site))
    page.get_by_role("button", name="Chat tools").click()
    side = page.get_by_role("complementary", name="Chat tools")
    side.locator("summary", has_text="Connection").click()
    samplers = side.locator("fieldset.samplers").bounding_box()
    name = side.get_by_label("New preset's name").bounding_box()
    length = side.get_by_label("Response length (tokens)").bounding_box()
    assert samplers is not None and name is not None and length is not None
    assert name["width"] > samplers["width"] * 0.8, "the name field is squeezed into a column"
    assert length["width"] >= 120, "a number's column is too narrow for its label"
    screenshot(page, "ux-connection-phone")


def test_a_groups_members_line_up_alike_on_a_phone(sized: Any, site: Site) -> None:
    card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Seraphina"}}
    site.call(site.tk.library.import_bytes(json.dumps(card).encode(), source="seraphina.json"))
    page = sized(PHONE)
    page.goto("/#/groups")
    page.get_by_role("button", name="New group").click()
    page.get_by_label("Group name").fill("Pair")
    for name in ("Mira", "Seraphina"):
        page.get_by_label("Add member").select_option(label=name)
        page.get_by_role("button", name="Add", exact=True).click()
    members = page.get_by_role("list", name="Members").locator(".member")
    expect(members).to_have_count(2)
    lefts, below = set(), []
    for i in range(2):
        name = members.nth(i).locator(".name").bounding_box()
        remove = members.nth(i).get_by_role("button", name="Remove").bounding_box()
        assert name is not None and remove is not None
        lefts.add(round(remove["x"]))
        below.append(remove["y"] >= name["y"] + name["height"] - 1)
    assert len(lefts) == 1, "the members' Remove buttons are not lined up"
    assert all(below) or not any(below)
    width, inner = _page_width(page)
    assert width <= inner
    screenshot(page, "ux-group-members-phone")
