"""Journeys of the Personas screen and of the chat screen's connection panel, in Chromium on a
real server: a persona made with a description and an avatar, picked and spoken as (the
request carries its description, the message is stored under its name); locked to the chat
and preselected after a reload over the browser's own pick; locked to a character, made the
default; the connection profile, the chat preset and its temperature switched mid-chat, each
reaching the next request and the prompt inspector; a text-completion profile's templates;
all of it at phone size too."""

from __future__ import annotations

import io
import json
import re
from typing import Any

from PIL import Image
from playwright.sync_api import Page, expect

from chat._server import Reply
from tavernkit.chat.personas import Personas
from tavernkit.models.profile import ConnectionProfile

from ._pages import new_chat, open_chat, send, stored_messages, turn
from ._site import Site
from .conftest import screenshot

DESKTOP = {"width": 1280, "height": 720}
PHONE = {"width": 390, "height": 844}


def png(width: int = 8, height: int = 8) -> bytes:
    """A small valid PNG."""
    out = io.BytesIO()
    Image.new("RGB", (width, height), "teal").save(out, format="PNG")
    return out.getvalue()


def sent(site: Site) -> dict[str, Any]:
    body: dict[str, Any] = site.upstream.requests[-1].body
    return body


def reply(site: Site, text: str = "Aye.") -> None:
    site.upstream.script(Reply(text=text, pace=0.01))


def add_persona(site: Site, name: str, description: str) -> str:
    personas = Personas(site.tk.store, owner=site.tk.owner)
    return site.call(personas.create(name, description))


def persona_note(page: Page) -> Any:
    return page.locator(".persona-note")


def test_a_persona_made_here_speaks_in_the_chat_and_its_lock_holds(page: Page, site: Site) -> None:
    page.set_viewport_size(DESKTOP)
    page.goto("/#/")
    page.get_by_role("link", name="Personas").click()
    expect(page.get_by_role("heading", name="Personas")).to_be_visible()
    page.get_by_label("New persona's name").fill("Selka")
    page.get_by_role("button", name="Add persona").click()
    expect(page.get_by_role("heading", name="Selka")).to_be_visible()
    page.get_by_label("Description", exact=True).fill(
        "{{user}} is the lighthouse keeper's apprentice."
    )
    page.get_by_label("Description position").select_option("In chat at a depth")
    page.get_by_label("Depth").fill("1")
    page.get_by_label("Role").select_option("User")
    page.get_by_label("Upload avatar").set_input_files(
        {"name": "selka.png", "mimeType": "image/png", "buffer": png()}
    )
    expect(page.locator("#toast")).to_have_text("Avatar saved")
    big = page.locator(".persona-head img.persona-avatar")
    expect(big).to_be_visible()
    assert big.evaluate("(img) => img.complete && img.naturalWidth") == 8
    page.get_by_role("button", name="Save persona").click()
    expect(page.locator("#toast")).to_have_text("Persona saved")
    # the list shows it with its avatar; the stored persona is what was typed
    item = page.get_by_role("list", name="Personas").get_by_role("link", name="Selka")
    expect(item.locator("img")).to_be_visible()
    stored = site.call(Personas(site.tk.store, owner=site.tk.owner).get("Selka"))[1]
    assert (stored.position, stored.depth, stored.role) == (4, 1, 1)
    screenshot(page, "personas-desktop")

    # pick it in a chat and speak as it
    chat = new_chat(site)
    open_chat(page, chat)
    page.get_by_label("Persona").select_option("Selka")
    expect(persona_note(page)).to_have_text("Speaking as Selka (your pick).")
    reply(site, "Welcome, apprentice.")
    turn(page, lambda: send(page, "The lamp needs oil."))
    messages = sent(site)["messages"]
    # at depth 1 as the user, as the persona's position says
    assert {"role": "user", "content": "Selka is the lighthouse keeper's apprentice."} in messages
    assert stored_messages(site, chat)[-2]["name"] == "Selka"
    expect(page.locator(".log .message.user .name").last).to_have_text("Selka")

    # lock it to the chat; the browser's own pick moves to another persona
    page.get_by_role("button", name="Lock to this chat").click()
    expect(persona_note(page)).to_have_text("Speaking as Selka: locked to this chat.")
    add_persona(site, "Bram", "{{user}} is a retired harbour pilot.")
    page.reload()
    page.get_by_label("Persona").select_option("Bram")
    expect(persona_note(page)).to_have_text(
        "Speaking as Bram for now; this chat is locked to Selka."
    )
    # after a reload the lock wins over the browser's pick, and says so
    page.reload()
    expect(page.get_by_label("Persona")).to_have_value("Selka")
    expect(persona_note(page)).to_have_text(
        "Speaking as Selka: locked to this chat (over your last pick, Bram)."
    )
    reply(site)
    turn(page, lambda: send(page, "Is the fog lifting?"))
    assert stored_messages(site, chat)[-2]["name"] == "Selka"
    # another chat of Mira's is not locked: the browser's pick applies there
    other = new_chat(site)
    open_chat(page, other)
    expect(page.get_by_label("Persona")).to_have_value("Bram")
    expect(persona_note(page)).to_have_text("Speaking as Bram (your pick).")
    screenshot(page, "persona-picker-desktop")
    # unlocking the first chat: the browser's pick again
    open_chat(page, chat)
    page.get_by_role("button", name="Unlock this chat").click()
    expect(page.get_by_role("button", name="Lock to this chat")).to_be_visible()
    page.reload()
    expect(page.get_by_label("Persona")).to_have_value("Bram")
    # a lock the server refuses (Bram was deleted meanwhile) stays on screen until dismissed
    site.call(site.tk.store.delete("persona", "Bram", owner=site.tk.owner))
    page.get_by_role("button", name="Lock to this chat").click()
    alert = page.locator(".persona-picker").get_by_role("alert")
    expect(alert).to_contain_text("404: no persona named")
    expect(alert.get_by_role("button", name="Retry")).to_be_visible()
    alert.get_by_role("button", name="Dismiss").click()
    expect(alert).to_have_count(0)
    assert site.call(site.tk.chats.load(chat)).header["chat_metadata"].get("persona") is None


def test_a_character_lock_and_the_default_persona_from_the_personas_screen(
    page: Page, site: Site
) -> None:
    page.set_viewport_size(DESKTOP)
    add_persona(site, "Corin", "{{user}} keeps the harbour's ledgers.")
    add_persona(site, "Dell", "{{user}} sells fish.")
    chat = new_chat(site)
    # from the chat: "Manage personas" opens the screen for this chat
    open_chat(page, chat)
    page.get_by_role("link", name="Manage personas").click()
    page.get_by_role("link", name="Dell").click()
    page.get_by_label("Default persona").check()
    expect(page.locator("#toast")).to_have_text("Dell is the default persona")
    expect(page.get_by_role("link", name="Dell")).to_contain_text("default")
    page.get_by_role("link", name="Corin").click()
    page.get_by_label("Character", exact=True).select_option("Mira")
    page.get_by_role("button", name="Lock to character").click()
    expect(page.get_by_role("list", name="Locked to characters")).to_contain_text("Locked to Mira")
    expect(page.get_by_role("link", name="Corin")).to_contain_text("locked to Mira")
    screenshot(page, "personas-locks-desktop")

    # back in the chat: the character's lock is preselected over the default
    page.get_by_role("link", name=re.compile("^Back to ")).click()
    expect(page.locator(".log .message").first).to_be_visible()
    expect(page.get_by_label("Persona")).to_have_value("Corin")
    expect(persona_note(page)).to_have_text("Speaking as Corin: locked to Mira.")
    reply(site)
    turn(page, lambda: send(page, "Ledgers balanced?"))
    assert "Corin keeps the harbour's ledgers." in json.dumps(sent(site))
    assert stored_messages(site, chat)[-2]["name"] == "Corin"
    # the server speaks as the lock too when a turn names nobody (the API, the inspector)
    page.get_by_role("link", name="Prompt inspector").click()
    expect(page.locator(".blocks")).to_contain_text("Corin keeps the harbour's ledgers.")
    page.go_back()

    # unlock Mira: the default persona speaks
    page.get_by_role("button", name="Unlock Mira").click()
    expect(page.get_by_label("Persona")).to_have_value("")
    expect(persona_note(page)).to_have_text("Speaking as Dell, the default persona.")
    reply(site)
    turn(page, lambda: send(page, "Any fish?"))
    assert stored_messages(site, chat)[-2]["name"] == "Dell"

    # delete the default persona (confirmed): no default any more
    page.goto("/#/personas")
    page.get_by_role("link", name="Dell").click()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete persona").click()
    expect(page.get_by_role("list", name="Personas")).not_to_contain_text("Dell")
    selections = site.call(site.tk.settings()).selections
    assert selections.persona is None and selections.character_personas == {}


def _open_connection(page: Page) -> None:
    panel = page.locator("details.connection")
    if panel.get_attribute("open") is None:
        panel.locator("summary").click()


def test_profile_preset_and_temperature_switch_mid_chat(page: Page, site: Site) -> None:
    page.set_viewport_size(DESKTOP)
    # a second profile on the same scripted upstream, another model, through Settings
    page.goto("/#/settings")
    page.get_by_label("Profile name").fill("second")
    page.get_by_label("Base URL").fill(site.upstream.base_url + "/v1")
    page.get_by_label("Model", exact=True).fill("m2")
    page.get_by_role("button", name="Add profile").click()
    expect(page.locator('tr[data-profile="second"]')).to_be_visible()
    cool = {"name": "Cool", "temperature": 0.2, "openai_max_tokens": 64}
    site.call(site.tk.store.put("chat_preset", cool, owner=site.tk.owner))

    chat = new_chat(site)
    open_chat(page, chat)
    reply(site)
    turn(page, lambda: send(page, "First."))
    assert sent(site)["model"] == "m1" and "temperature" not in sent(site)

    _open_connection(page)
    expect(page.locator("details.connection summary")).to_have_text("Connection: scripted · m1")
    page.get_by_label("Connection profile").select_option("second")
    expect(page.locator("details.connection summary")).to_have_text("Connection: second · m2")
    reply(site)
    turn(page, lambda: send(page, "Second."))
    assert sent(site)["model"] == "m2"

    # no preset yet: make one here, it is selected, then its temperature set
    page.get_by_label("New preset's name").fill("Warm")
    page.get_by_role("button", name="New preset").click()
    expect(page.get_by_label("Chat preset")).to_have_value("Warm")
    expect(page.locator(".samplers legend")).to_have_text("Samplers (Warm)")
    page.get_by_label("Temperature").fill("0.42")
    page.get_by_label("Max response tokens").fill("120")
    page.get_by_role("button", name="Save samplers").click()
    expect(page.locator("#toast")).to_have_text("Saved to Warm")
    reply(site)
    turn(page, lambda: send(page, "Third."))
    assert (sent(site)["model"], sent(site)["temperature"]) == ("m2", 0.42)
    assert sent(site)["max_tokens"] == 120
    screenshot(page, "connection-desktop")

    # switch the preset mid-chat
    page.get_by_label("Chat preset").select_option("Cool")
    expect(page.get_by_label("Temperature")).to_have_value("0.2")
    reply(site)
    turn(page, lambda: send(page, "Fourth."))
    assert (sent(site)["temperature"], sent(site)["max_tokens"]) == (0.2, 64)

    # the inspector shows the same connection and samplers
    page.get_by_role("link", name="Prompt inspector").click()
    expect(page.locator(".summary")).to_contain_text("second")
    expect(page.locator(".summary")).to_contain_text("m2")
    page.get_by_text("Request body").click()
    body = page.locator(".inspection details pre")
    expect(body).to_contain_text('"temperature": 0.2')
    expect(body).to_contain_text('"model": "m2"')
    page.go_back()

    # back to the first profile and no preset: as at the start
    _open_connection(page)
    page.get_by_label("Connection profile").select_option("scripted")
    # picked at once, while the panel redraws: neither pick is lost
    page.get_by_label("Chat preset").select_option("")
    expect(page.locator("details.connection summary")).to_have_text("Connection: scripted · m1")
    expect(page.get_by_label("New preset's name")).to_be_visible()
    reply(site)
    turn(page, lambda: send(page, "Fifth."))
    assert sent(site)["model"] == "m1" and "temperature" not in sent(site)


def test_a_text_completion_profile_shows_its_templates(page: Page, site: Site) -> None:
    page.set_viewport_size(DESKTOP)
    text = ConnectionProfile(
        name="texty",
        api="text",
        source="openai",
        base_url=site.upstream.base_url + "/v1",
        model="t1",
    )
    site.call(site.tk.store.put("connection_profile", text, owner=site.tk.owner))
    instruct = {
        "name": "Plain",
        "input_sequence": "### You:",
        "output_sequence": "### Reply:",
        "wrap": True,
    }
    site.call(site.tk.store.put("instruct", instruct, owner=site.tk.owner))
    chat = new_chat(site)
    open_chat(page, chat)
    _open_connection(page)
    page.get_by_label("Connection profile").select_option("texty")
    expect(page.get_by_label("Instruct template")).to_be_visible()
    expect(page.get_by_label("Chat preset")).to_have_count(0)
    page.get_by_label("Instruct template").select_option("Plain")
    expect(page.locator("#toast")).to_have_text("Instruct template: Plain")
    page.get_by_label("Instruct mode").check()
    expect(page.locator("#toast")).to_have_text("Instruct mode on")
    page.get_by_label("Response length (tokens)").fill("77")
    page.get_by_role("button", name="Save lengths").click()
    expect(page.locator("#toast")).to_have_text("Lengths saved")
    screenshot(page, "connection-text-desktop")
    reply(site)
    turn(page, lambda: send(page, "Hello there."))
    request = sent(site)
    assert request["model"] == "t1" and request["max_tokens"] == 77
    assert "### You:" in request["prompt"] and "Hello there." in request["prompt"]
    # leave the profile as the other journeys expect it
    page.get_by_label("Connection profile").select_option("scripted")
    expect(page.get_by_label("Chat preset")).to_be_visible()
    settings = site.call(site.tk.settings())
    assert settings.selections.profile == "scripted"


def test_personas_and_the_connection_at_phone_size(page: Page, site: Site) -> None:
    page.set_viewport_size(PHONE)
    personas = site.call(Personas(site.tk.store, owner=site.tk.owner).list())
    if "Selka" not in {p.name for p in personas}:
        add_persona(site, "Selka", "{{user}} is the lighthouse keeper's apprentice.")
    page.goto("/#/personas")
    page.get_by_role("link", name="Selka").click()
    expect(page.get_by_role("button", name="Save persona")).to_be_visible()
    # the editor comes first at phone size and nothing is wider than the screen
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot(page, "personas-phone")

    chat = new_chat(site)
    open_chat(page, chat)
    page.get_by_role("button", name="Chat tools").click()
    expect(page.get_by_label("Persona")).to_be_visible()
    page.get_by_label("Persona").select_option("Selka")
    _open_connection(page)
    expect(page.get_by_label("Connection profile")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot(page, "connection-phone")
    page.get_by_role("button", name="Close").click()
    reply(site)
    turn(page, lambda: send(page, "From my phone."))
    assert stored_messages(site, chat)[-2]["name"] == "Selka"
