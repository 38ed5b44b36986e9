"""The third UX pass: a SillyTavern user's journeys at a desktop and a phone size, each step
screenshotted (test-output/screenshots/ux3-*.png): a first visit to an empty library (which
model replies, and the way to connect one's own; no empty pager); a character made from
scratch and chatted with (swipe, continue, regenerate, edit, delete; the editor's toast moves
above the chat's composer; the edit box clear of the buttons); a group chat whose members change
mid-chat (the editor leads back to the chat, saving first); a preset and a profile picked in the
chat reaching the request; a persona switched mid-chat (a visible label, the message box naming
it); a failed reply and a failed connection test saying what to do, with Retry and the way to
the connection settings."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from chat._server import Reply
from tavernkit.formats.cards import card_to_png
from tavernkit.models.character import Character
from tavernkit.models.profile import ConnectionProfile

from ._pages import last_body, send, sized_pages, stored_messages, turn
from ._site import Site
from .conftest import screenshot

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 720}
SIZES = pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])


def size_of(viewport: dict[str, int]) -> str:
    return "phone" if viewport is PHONE else "desktop"


@pytest.fixture
def sized(browser: Any, site: Site) -> Iterator[Any]:
    with sized_pages(browser, site) as make:
        yield make


def fits(page: Page) -> None:
    width, inner = page.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
    assert width <= inner, f"the page is {width} px wide on a {inner} px screen"


@SIZES
def test_a_first_visit_to_an_empty_library(
    browser: Any, tmp_path: Path, viewport: dict[str, int]
) -> None:
    size = size_of(viewport)
    with Site(tmp_path / "home", scripted=False) as bare, sized_pages(browser, bare) as make:
        page = make(viewport)
        page.goto("/")
        # the three ways in: import a card, make one, or the demo character...
        expect(page.get_by_role("button", name="choose files")).to_be_visible()
        expect(page.get_by_role("link", name="make one")).to_be_visible()
        expect(page.get_by_role("button", name="add the demo character (Wren)")).to_be_visible()
        # ...and which model will reply, with the way to connect one's own
        hint = page.locator(".grid .connection-hint")
        expect(hint).to_contain_text("Replies come from the built-in local model")
        expect(hint).to_contain_text("your own model or API")
        expect(page.get_by_role("button", name="Next")).to_be_hidden()  # no "0–0 of 0" pager
        fits(page)
        screenshot(page, f"ux3-1-empty-{size}")
        hint.get_by_role("link", name="add a connection profile in Settings").click()
        expect(page.get_by_role("heading", name="Connection profiles")).to_be_visible()
        expect(page.get_by_label("Base URL")).to_be_visible()
        screenshot(page, f"ux3-1-settings-{size}")


@SIZES
def test_a_character_made_from_scratch_and_chatted_with(
    sized: Any, site: Site, viewport: dict[str, int]
) -> None:
    size = size_of(viewport)
    page = sized(viewport)
    page.goto("/")
    page.get_by_role("button", name="New character").click()
    name = f"Tamsin{size}"
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Description").fill("A ferry pilot who talks in short sentences.")
    page.get_by_label("First message").fill("The ferry leaves at dawn.")
    page.get_by_role("button", name="Add greeting").click()
    screenshot(page, f"ux3-2-editor-new-{size}")
    page.get_by_label("Greeting 1", exact=True).fill("Fog again. Sit down.")
    png = card_to_png(Character.create(name="Picture"))
    page.locator(".avatar-box input[type=file]").set_input_files(
        {"name": "t.png", "mimeType": "image/png", "buffer": png}
    )
    page.get_by_role("button", name="Use this avatar").click()
    screenshot(page, f"ux3-2-editor-filled-{size}")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("button", name="Chat", exact=True)).to_be_visible()
    screenshot(page, f"ux3-2-editor-saved-{size}")
    page.get_by_role("button", name="Chat", exact=True).click()
    expect(page.locator(".log .message").first).to_contain_text("The ferry leaves at dawn.")
    screenshot(page, f"ux3-2-chat-open-{size}")
    if viewport is PHONE:
        # the editor's "Created" toast, still shown, moves above the chat's composer
        toast = page.locator("#toast")
        expect(toast).to_have_text(f"Created {name}")
        expect(toast).to_have_css("opacity", "1")
        box, composer = toast.bounding_box(), page.locator(".composer").bounding_box()
        assert box is not None and composer is not None
        assert box["y"] + box["height"] <= composer["y"] + 1, "the toast covers the composer"

    site.upstream.script(Reply(text="Tickets first.", pace=0.01))
    turn(page, lambda: send(page, "Hello there."))
    expect(last_body(page)).to_have_text("Tickets first.")
    site.upstream.script(Reply(text="Or pay on board.", pace=0.01))
    turn(page, page.get_by_role("button", name="Next swipe").click)
    expect(last_body(page)).to_have_text("Or pay on board.")
    screenshot(page, f"ux3-2-chat-swiped-{size}")
    site.upstream.script(Reply(text="Cash only.", pace=0.01))
    turn(page, page.get_by_role("button", name="Continue").click)
    screenshot(page, f"ux3-2-chat-continued-{size}")
    site.upstream.script(Reply(text="Regenerated reply.", pace=0.01))
    turn(page, page.get_by_role("button", name="Regenerate").click)
    expect(last_body(page)).to_have_text("Regenerated reply.")
    page.get_by_role("button", name="Edit message 2").click()
    screenshot(page, f"ux3-2-chat-editing-{size}")
    # the edit box (and its focus ring) clear of the message's buttons above it
    area = page.get_by_role("textbox", name="Edit message").bounding_box()
    above = page.get_by_role("button", name="Edit message 2").bounding_box()
    assert area is not None and above is not None
    assert area["y"] >= above["y"] + above["height"] + 4, "the edit box touches the buttons"
    page.get_by_role("textbox", name="Edit message").fill("Hello, pilot.")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".log .message").nth(1).locator(".body")).to_have_text("Hello, pilot.")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete message 3").click()
    expect(page.locator(".log .message")).to_have_count(2)
    screenshot(page, f"ux3-2-chat-deleted-{size}")
    fits(page)


def add_card(site: Site, name: str, greeting: str) -> None:
    if name not in {c.name for c in site.call(site.tk.store.list("character"))}:
        png = card_to_png(Character.create(name=name, first_mes=greeting))
        site.call(site.tk.library.import_bytes(png, source=f"{name.lower()}.png"))


@SIZES
def test_a_group_chat_with_members_changed_mid_chat(
    sized: Any, site: Site, viewport: dict[str, int]
) -> None:
    size = size_of(viewport)
    add_card(site, "Finn", "Finn coils a rope.")
    add_card(site, "Juno", "Juno waves from the wheelhouse.")
    page = sized(viewport)
    page.goto("/#/groups")
    page.get_by_role("button", name="New group").click()
    page.get_by_label("Group name").fill(f"Crew {size}")
    for name in ("Finn", "Juno"):
        page.get_by_label("Add member").select_option(label=name)
        page.get_by_role("button", name="Add", exact=True).click()
    page.get_by_label("Reply strategy").select_option(index=1)
    page.get_by_role("button", name="Create group").click()
    expect(page.get_by_role("button", name="Start new chat")).to_be_visible()
    screenshot(page, f"ux3-3-group-made-{size}")
    page.get_by_role("button", name="Start new chat").click()
    expect(page.locator(".log .message").first).to_be_visible()
    site.upstream.script(Reply(text="Aye.", pace=0.01), Reply(text="On it.", pace=0.01))
    turn(page, lambda: send(page, "All hands!"))
    screenshot(page, f"ux3-3-group-chat-{size}")
    # who speaks next: the bar
    site.upstream.script(Reply(text="Juno here.", pace=0.01))
    turn(page, page.get_by_role("button", name="Make Juno speak").click)
    expect(last_body(page)).to_have_text("Juno here.")
    screenshot(page, f"ux3-3-group-replied-{size}")
    # add Mira, mute Finn, remove Juno mid-chat
    chat_url = page.url
    if viewport is PHONE:
        page.get_by_role("button", name="Chat tools").click()
    page.get_by_role("link", name="Edit group").click()
    page.get_by_label("Add member").select_option(label="Mira")
    page.get_by_role("button", name="Add", exact=True).click()
    members = page.get_by_role("list", name="Members").get_by_role("listitem")
    members.filter(has_text="Finn").get_by_label("Mute").check()
    members.filter(has_text="Juno").get_by_role("button", name="Remove").click()
    screenshot(page, f"ux3-3-group-edited-{size}")
    # the editor opened from the chat leads back to it, saving the edits on the way
    page.get_by_role("link", name="Back to the chat").click()
    expect(page).to_have_url(chat_url)
    expect(page.locator(".log .message").first).to_be_visible()
    speakers = page.get_by_role("list", name="Speakers")
    expect(speakers.get_by_role("button")).to_have_text(["Make Finn speak", "Make Mira speak"])
    expect(speakers.locator(".is-muted")).to_contain_text("Make Finn speak")
    screenshot(page, f"ux3-3-group-back-{size}")
    site.upstream.script(Reply(text="Mira joins.", pace=0.01))
    turn(page, lambda: send(page, "Welcome, Mira."))
    expect(last_body(page)).to_have_text("Mira joins.")  # the muted Finn does not speak
    expect(page.locator(".log .message").last.locator(".meta .name")).to_have_text("Mira")
    fits(page)


@SIZES
def test_a_preset_and_profile_chosen_in_the_chat_reach_the_request(
    sized: Any, site: Site, viewport: dict[str, int]
) -> None:
    size = size_of(viewport)
    page = sized(viewport)
    chat = site.call(site.tk.chats.new_chat("Mira")).id
    page.goto(f"/#/chat/{chat}")
    expect(page.locator(".log .message").first).to_be_visible()
    if viewport is PHONE:
        page.get_by_role("button", name="Chat tools").click()
    side = page.get_by_role("complementary", name="Chat tools")
    side.locator("summary", has_text="Connection").click()
    chosen = side.get_by_label("Chat preset")
    if chosen.input_value():  # the module's other tests leave none, but be sure
        chosen.select_option(label="None (defaults)")
        expect(side.locator("fieldset.samplers legend")).to_have_text("Samplers")
    screenshot(page, f"ux3-4-connection-{size}")
    # with no preset, the response length spans the panel (its label on one line)
    samplers = side.locator("fieldset.samplers").bounding_box()
    length = side.get_by_label("Response length (tokens)").bounding_box()
    assert samplers is not None and length is not None
    assert length["width"] > samplers["width"] * 0.7, "the length is squeezed into a column"
    side.get_by_label("New preset's name").fill(f"Warm {size}")
    side.get_by_role("button", name="New preset").click()
    expect(side.locator("fieldset.samplers legend")).to_have_text(f"Samplers (Warm {size})")
    side.get_by_label("Temperature").fill("0.35")
    side.get_by_role("button", name="Save samplers").click()
    screenshot(page, f"ux3-4-preset-made-{size}")
    if viewport is PHONE:
        side.get_by_role("button", name="Close").click()
    site.upstream.script(Reply(text="Warm words.", pace=0.01))
    turn(page, lambda: send(page, "Say something."))
    assert site.upstream.requests[-1].body.get("temperature") == 0.35
    screenshot(page, f"ux3-4-preset-sent-{size}")

    # another connection profile, picked in the chat, answers the next turn
    night = ConnectionProfile(
        name="nightly",
        api="chat",
        source="openai",
        base_url=site.upstream.base_url + "/v1",
        model="m-night",
    )
    stored = site.call(site.tk.store.list("connection_profile", owner=site.tk.owner))
    if "nightly" not in {p.name for p in stored}:
        site.call(site.tk.store.put("connection_profile", night, owner=site.tk.owner))
    page.reload()
    expect(page.locator(".log .message").first).to_be_visible()
    if viewport is PHONE:
        page.get_by_role("button", name="Chat tools").click()
    side.locator("summary", has_text="Connection").click()
    side.get_by_label("Connection profile").select_option(label="nightly (m-night)")
    expect(side.locator("summary", has_text="Connection")).to_have_text(
        "Connection: nightly · m-night"
    )
    screenshot(page, f"ux3-4-profile-picked-{size}")
    if viewport is PHONE:
        side.get_by_role("button", name="Close").click()
    site.upstream.script(Reply(text="From the night shift.", pace=0.01))
    turn(page, lambda: send(page, "Who is this?"))
    assert site.upstream.requests[-1].body["model"] == "m-night"
    # back as it was for the module's other tests
    if viewport is PHONE:
        page.get_by_role("button", name="Chat tools").click()
    side.get_by_label("Connection profile").select_option(label="scripted (m1)")
    expect(side.locator("summary", has_text="Connection")).to_have_text("Connection: scripted · m1")
    side.get_by_label("Chat preset").select_option(label="None (defaults)")
    expect(side.locator("fieldset.samplers legend")).to_have_text("Samplers")


@SIZES
def test_switching_persona_mid_chat(sized: Any, site: Site, viewport: dict[str, int]) -> None:
    from tavernkit.chat.personas import Personas

    size = size_of(viewport)
    personas = Personas(site.tk.store, owner=site.tk.owner)
    known = {p.name for p in site.call(site.tk.store.list("persona", owner=site.tk.owner))}
    if "Bram" not in known:
        site.call(personas.create("Bram", "{{user}} is a retired harbour pilot."))
    page = sized(viewport)
    chat = site.call(site.tk.chats.new_chat("Mira")).id
    page.goto(f"/#/chat/{chat}")
    expect(page.locator(".log .message").first).to_be_visible()
    site.upstream.script(Reply(text="Hello Ada.", pace=0.01))
    turn(page, lambda: send(page, "Hi."))
    if viewport is PHONE:
        page.get_by_role("button", name="Chat tools").click()
    screenshot(page, f"ux3-5-persona-side-{size}")
    # the picker says what it is in words on the screen, not only to a screen reader
    label = page.locator(".persona-picker label").filter(has_text="Persona")
    expect(label).to_be_visible()
    expect(label.locator("select")).to_have_count(1)
    box = page.get_by_label("Message", exact=True)
    expect(box).to_have_attribute("placeholder", re.compile("^Type a message"))
    page.get_by_label("Persona").select_option("Bram")
    # the message box names who the next message is sent as, the side panel closed or not
    expect(box).to_have_attribute("placeholder", re.compile("^Message as Bram "))
    screenshot(page, f"ux3-5-persona-picked-{size}")
    if viewport is PHONE:
        page.get_by_role("complementary", name="Chat tools").get_by_role(
            "button", name="Close"
        ).click()
    site.upstream.script(Reply(text="Hello Bram.", pace=0.01))
    turn(page, lambda: send(page, "It is me now."))
    assert stored_messages(site, chat)[-2]["name"] == "Bram"
    screenshot(page, f"ux3-5-persona-spoken-{size}")


@SIZES
def test_a_failed_reply_says_what_to_do_and_stays_with_a_retry(
    sized: Any, site: Site, viewport: dict[str, int]
) -> None:
    size = size_of(viewport)
    page = sized(viewport)
    chat = site.call(site.tk.chats.new_chat("Mira")).id
    page.goto(f"/#/chat/{chat}")
    expect(page.locator(".log .message").first).to_be_visible()

    # the model's server fails on its side: what that means, and Retry
    site.upstream.script(Reply(status=500, error={"message": "overloaded"}))
    turn(page, lambda: send(page, "Are you there?"))
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("failed on its side: retry, or try again later")
    expect(alert.get_by_role("button", name="Connection settings")).to_have_count(0)
    screenshot(page, f"ux3-6-error-{size}")
    page.wait_for_timeout(2000)  # it stays
    expect(alert).to_be_visible()
    site.upstream.script(Reply(text="Sorry, here now.", pace=0.01))
    turn(page, alert.get_by_role("button", name="Retry").click)
    expect(last_body(page)).to_have_text("Sorry, here now.")
    expect(alert).to_have_count(0)
    screenshot(page, f"ux3-6-retried-{size}")

    # a refused key: Retry cannot fix it; the alert says where it is fixed and goes there
    site.upstream.script(Reply(status=401, error={"message": "bad key"}))
    turn(page, lambda: send(page, "And now?"))
    expect(alert).to_contain_text("refused the API key: check it in Settings")
    expect(alert.get_by_role("button", name="Retry")).to_be_visible()
    screenshot(page, f"ux3-6-auth-{size}")
    for control in ("Retry", "Connection settings", "Dismiss"):
        box = alert.get_by_role("button", name=control).bounding_box()
        assert box is not None and box["x"] + box["width"] <= viewport["width"]
    fits(page)
    alert.get_by_role("button", name="Connection settings").click()
    expect(page).to_have_url(re.compile("#/settings$"))
    expect(page.get_by_role("heading", name="Connection profiles")).to_be_visible()


@SIZES
def test_a_connection_test_that_fails_in_settings(
    sized: Any, site: Site, viewport: dict[str, int]
) -> None:
    size = size_of(viewport)
    page = sized(viewport)
    page.goto("/#/settings")
    row = page.locator('tr[data-profile="scripted"]')
    expect(row).to_be_visible()
    site.upstream.script(Reply(status=401, error={"message": "bad key"}))
    row.get_by_role("button", name="Test scripted").click()
    # the failure stays in the profile's row, in view, until the next test
    expect(row.locator(".check")).to_contain_text("failed (auth")
    # ...in words a user acts on, not only the task code and the error class
    expect(row.locator(".check")).to_contain_text("refused the API key, or the profile has none")
    page.wait_for_timeout(1500)
    expect(row.locator(".check")).to_be_visible()
    box = row.locator(".check").bounding_box()
    assert box is not None and box["x"] + box["width"] <= viewport["width"]
    screenshot(page, f"ux3-6-settings-test-failed-{size}")
    fits(page)
