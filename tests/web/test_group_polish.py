"""Group chat polish a SillyTavern user asked for, in Chromium against a real server: the group
chat's members strip says who speaks next (list order: who, in order; manual: nobody on their
own; natural and pooled: who may) and has a "Make X speak" per member (SillyTavern's force
talk, a muted member too); the group editor's per-member controls each name their member in
their visible text ("Remove Mira", "Mute Juno"); the chat's connection panel says its profile
and preset pickers apply to all chats, and a change's toast says what changed."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from chat._server import Reply
from tavernkit.groups.records import load_group
from tavernkit.models.group import ActivationStrategy
from tavernkit.models.profile import ConnectionProfile

from ._pages import last_body, new_chat, open_chat, stored_messages, turn
from ._site import Site
from .conftest import screenshot
from .test_group_chat import add_crew, make_group

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 720}


def strip(page: Page) -> Any:
    return page.get_by_role("region", name="Who speaks")


def chip(page: Page, name: str) -> Any:
    return (
        strip(page)
        .get_by_role("listitem")
        .filter(has=page.get_by_role("button", name=f"Make {name} speak", exact=True))
    )


def fits(page: Page) -> None:
    """Nothing on the page is wider than the window (the strip scrolls inside itself)."""
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    wide = page.evaluate(
        "() => [...document.querySelectorAll('body *')]"
        ".filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1)"
        ".slice(0, 5).map((e) => e.tagName + '.' + e.className)"
    )
    assert overflow <= 0, f"the page is {overflow}px wider than the window: {wide}"


def test_the_members_strip_says_who_speaks_next_and_makes_a_member_speak(
    page: Page, site: Site
) -> None:
    add_crew(site)
    chat = make_group(site, "Deck", ["Mira", "Finn", "Juno"], disabled_members=["Juno.png"])
    page.set_viewport_size(DESKTOP)
    open_chat(page, chat)

    # list order: the unmuted members reply in order, Mira first; Juno is muted
    expect(strip(page).locator(".next-speaker")).to_have_text("Next: Mira, then Finn (list order)")
    speak = strip(page).get_by_role("button")
    expect(speak).to_have_text(["Make Mira speak", "Make Finn speak", "Make Juno speak"])
    expect(chip(page, "Mira")).to_contain_text("next")
    expect(chip(page, "Juno")).to_contain_text("muted")
    expect(chip(page, "Juno")).to_have_class("speaker-chip is-muted")
    screenshot(page, "group-polish-strip-desktop")

    # Finn speaks now, out of turn: only Finn replies, under his name
    site.upstream.script(Reply(text="Finn, reporting.", pace=0.01))
    before = len(stored_messages(site, chat))
    turn(page, strip(page).get_by_role("button", name="Make Finn speak").click)
    expect(last_body(page)).to_have_text("Finn, reporting.")
    stored = stored_messages(site, chat)
    assert len(stored) == before + 1
    assert (stored[-1]["name"], stored[-1]["original_avatar"]) == ("Finn", "Finn.png")
    # the request was Finn's: his card, not Mira's, is the one carried (swap mode)
    request = str(site.upstream.requests[-1].body)
    assert "Finn is Finn, one of the crew." in request and "Mira is Mira" not in request

    # the muted Juno speaks when asked to, as SillyTavern's force talk does
    site.upstream.script(Reply(text="Juno, from the wheelhouse.", pace=0.01))
    turn(page, strip(page).get_by_role("button", name="Make Juno speak").click)
    expect(last_body(page)).to_have_text("Juno, from the wheelhouse.")
    assert stored_messages(site, chat)[-1]["name"] == "Juno"

    page.set_viewport_size(PHONE)
    expect(strip(page).get_by_role("button", name="Make Mira speak")).to_be_visible()
    screenshot(page, "group-polish-strip-phone")
    fits(page)


def test_each_strategy_says_who_will_or_may_speak(page: Page, site: Site) -> None:
    add_crew(site)
    page.set_viewport_size(DESKTOP)
    cases = [
        (
            "Bridge",
            ActivationStrategy.MANUAL,
            [],
            "Manual: nobody replies on their own. Pick who speaks next.",
        ),
        (
            "Galley",
            ActivationStrategy.NATURAL,
            ["Finn.png"],
            "May speak next: Mira, Juno (natural order: whoever you name, else by talkativeness)",
        ),
        (
            "Hold",
            ActivationStrategy.POOLED,
            [],
            "May speak next: one of Mira, Juno, Finn (pooled order)",
        ),
        (
            "Brig",
            ActivationStrategy.LIST,
            ["Mira.png", "Juno.png"],
            "Every member is muted: nobody replies unless you make one speak.",
        ),
    ]
    for name, strategy, muted, says in cases:
        members = ["Mira", "Juno"] if name == "Brig" else ["Mira", "Juno", "Finn"]
        chat = make_group(
            site, name, members, activation_strategy=int(strategy), disabled_members=muted
        )
        open_chat(page, chat)
        expect(strip(page).locator(".next-speaker")).to_have_text(says)
        # no strategy but list order names a sure first speaker
        expect(strip(page).locator(".is-next")).to_have_count(0)
        if name == "Bridge":
            screenshot(page, "group-polish-manual-desktop")

    # manual: nobody answers a message, a member asked to does
    chat = make_group(site, "Skiff", ["Mira", "Finn"], activation_strategy=2)
    open_chat(page, chat)
    site.upstream.script(Reply(text="Mira here.", pace=0.01))
    turn(page, strip(page).get_by_role("button", name="Make Mira speak").click)
    expect(last_body(page)).to_have_text("Mira here.")
    assert stored_messages(site, chat)[-1]["name"] == "Mira"
    page.set_viewport_size(PHONE)
    fits(page)
    screenshot(page, "group-polish-manual-phone")


def test_the_group_editor_names_each_member_in_its_controls(page: Page, site: Site) -> None:
    add_crew(site)
    make_group(site, "Watch", ["Mira", "Finn", "Juno"], disabled_members=["Juno.png"])
    group = site.call(load_group(site.tk.store, "Watch", owner=site.tk.owner))
    page.set_viewport_size(DESKTOP)
    page.goto(f"/#/group/{group.id}")
    members = page.get_by_role("list", name="Members")
    expect(members.get_by_role("listitem")).to_have_count(3)

    # one "Remove <name>" per member, its visible text its name; no bare "Remove"
    removes = members.get_by_role("button", name="Remove")
    expect(removes).to_have_text(["Remove Mira", "Remove Finn", "Remove Juno"])
    expect(members.get_by_role("button", name="Remove", exact=True)).to_have_count(0)
    for name in ("Mira", "Finn", "Juno"):
        expect(members.get_by_role("button", name=f"Remove {name}", exact=True)).to_have_count(1)
        mute = page.get_by_role("checkbox", name=f"Mute {name}", exact=True)
        expect(members.locator(mute)).to_have_count(1)
        expect(members.locator("label").filter(has=mute)).to_have_text(f"Mute {name}")
    expect(members.get_by_role("checkbox", name="Mute Juno")).to_be_checked()
    # the arrows are icons: named for their member by aria-label, with the same tooltip
    up = members.get_by_role("button", name="Move Finn up", exact=True)
    expect(up).to_have_attribute("title", "Move Finn up")
    screenshot(page, "group-polish-editor-desktop")

    # the user acts on the members by those names: Finn first, Mira unmuted... Juno removed
    up.click()
    members.get_by_role("checkbox", name="Mute Mira", exact=True).check()
    members.get_by_role("button", name="Remove Juno", exact=True).click()
    expect(members.get_by_role("listitem").locator(".name")).to_have_text(["Finn", "Mira"])
    page.set_viewport_size(PHONE)
    fits(page)
    screenshot(page, "group-polish-editor-phone")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#toast")).to_have_text("Group saved")
    stored = site.call(load_group(site.tk.store, "Watch", owner=site.tk.owner))
    assert [(m.name, m.muted) for m in stored.members] == [("Finn", False), ("Mira", True)]


def _open_connection(page: Page) -> None:
    panel = page.locator("details.connection")
    if panel.get_attribute("open") is None:
        panel.locator("summary").click()


def test_the_connection_pickers_say_they_apply_to_all_chats(page: Page, site: Site) -> None:
    second = ConnectionProfile(
        name="second",
        api="chat",
        source="openai",
        base_url=site.upstream.base_url + "/v1",
        model="m2",
    )
    site.call(site.tk.store.put("connection_profile", second, owner=site.tk.owner))
    site.call(site.tk.store.put("chat_preset", {"name": "Brisk"}, owner=site.tk.owner))
    chat = new_chat(site)
    page.set_viewport_size(DESKTOP)
    open_chat(page, chat)
    _open_connection(page)

    profile = page.get_by_label("Connection profile")
    preset = page.get_by_label("Chat preset")
    for picker in (profile, preset):
        hint = page.locator(f"#{picker.get_attribute('aria-describedby')}")
        expect(hint).to_have_text("Applies to all chats")
        expect(hint).to_be_visible()
    screenshot(page, "group-polish-connection-desktop")

    try:
        profile.select_option("second")
        expect(page.locator("#toast")).to_have_text("Connection profile for all chats: second")
        preset.select_option("Brisk")
        expect(page.locator("#toast")).to_have_text("Chat preset for all chats: Brisk")
        # what the toast says holds: another chat opens with the same choices
        other = new_chat(site)
        open_chat(page, other)
        _open_connection(page)
        expect(page.get_by_label("Connection profile")).to_have_value("second")
        expect(page.get_by_label("Chat preset")).to_have_value("Brisk")
        page.get_by_label("Chat preset").select_option("")
        expect(page.locator("#toast")).to_have_text("Chat preset for all chats: None (defaults)")
        page.set_viewport_size(PHONE)
        page.get_by_role("button", name="Chat tools").click()
        expect(page.get_by_text("Applies to all chats").first).to_be_visible()
        fits(page)
        screenshot(page, "group-polish-connection-phone")
    finally:
        page.set_viewport_size(DESKTOP)
        _open_connection(page)
        page.get_by_label("Connection profile").select_option("scripted")
        expect(page.locator("#toast")).to_have_text("Connection profile for all chats: scripted")
