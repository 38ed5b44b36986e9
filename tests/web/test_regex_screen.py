"""The regex screens in a real browser: a script written in the editor with its live test box,
listed, moved, turned off and on, exported and imported; a display-only script changing what
the chat shows while the stored text stays; a card with its own scripts asked about when its
chat opens, allowed, and then changing what is stored; the phone layout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Page, expect

from chat._server import Reply

from ._pages import last_body, open_chat, send, stored_messages, turn
from ._site import Site
from .conftest import screenshot


def _scripts(site: Site) -> list[dict[str, Any]]:
    return [s.to_wire() for s in site.call(site.tk.regex.scripts())]


def _clear(site: Site) -> None:
    for script in _scripts(site):
        site.call(site.tk.regex.delete(script["id"]))


def test_a_script_is_written_tested_listed_moved_toggled_and_exported(
    page: Page, site: Site, tmp_path: Path
) -> None:
    _clear(site)
    page.goto("/#/regex")
    expect(page.get_by_role("heading", name="Regex scripts")).to_be_visible()
    page.get_by_role("button", name="New script").click()
    page.get_by_label("Script name").fill("Hide OOC")
    page.get_by_label("Find regex").fill("/\\s*\\(OOC:.*?\\)/g")
    page.get_by_label("Test input").fill("Hi (OOC: brb) there")
    expect(page.locator(".regex-output")).to_have_text("Hi there")
    page.get_by_label("AI output").check()
    screenshot(page, "regex-editor")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".regex-script")).to_have_count(1)
    saved = _scripts(site)[0]
    assert saved["findRegex"] == "/\\s*\\(OOC:.*?\\)/g" and saved["placement"] == [1, 2]
    assert saved["markdownOnly"] is True  # the editor's default: display only

    page.get_by_role("button", name="New script").click()
    page.get_by_label("Script name").fill("Shout")
    page.get_by_label("Find regex").fill("/(\\w+)!/g")
    page.get_by_label("Replace with").fill("$1!!")
    page.get_by_label("Alter chat display").uncheck()
    page.get_by_role("button", name="Save").click()
    rows = page.locator(".regex-script")
    expect(rows).to_have_count(2)
    rows.nth(1).get_by_role("button", name="Up").click()
    expect(rows.first.locator(".regex-name")).to_have_text("Shout")
    assert [s["scriptName"] for s in _scripts(site)] == ["Shout", "Hide OOC"]
    rows.first.get_by_role("button", name="Turn off").click()
    expect(rows.first.get_by_role("button", name="Turn on")).to_be_visible()
    assert _scripts(site)[0]["disabled"] is True
    screenshot(page, "regex-list")

    with page.expect_download() as download:
        page.get_by_role("link", name="Export all").click()
    exported = json.loads(Path(download.value.path()).read_text())
    assert [s["scriptName"] for s in exported] == ["Shout", "Hide OOC"]
    file = tmp_path / "shout.json"
    file.write_text(json.dumps({**exported[0], "scriptName": "Shout copy"}))
    page.locator("input[type=file]").set_input_files(str(file))
    expect(rows).to_have_count(3)
    assert _scripts(site)[2]["scriptName"] == "Shout copy"


def test_display_only_and_a_cards_own_scripts_in_the_chat(page: Page, site: Site) -> None:
    _clear(site)
    site.call(
        site.tk.regex.add(
            {
                "scriptName": "Hide OOC",
                "findRegex": "/\\s*\\(OOC:.*?\\)/g",
                "placement": [1, 2],
                "markdownOnly": True,
            }
        )
    )
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Rhea",
            "description": "",
            "personality": "",
            "scenario": "",
            "first_mes": "Draw your sword.",
            "mes_example": "",
            "extensions": {
                "regex_scripts": [
                    {
                        "id": "c1",
                        "scriptName": "Card Script",
                        "findRegex": "/sword/gi",
                        "replaceString": "blade",
                        "trimStrings": [],
                        "placement": [1, 2],
                        "disabled": False,
                        "markdownOnly": False,
                        "promptOnly": False,
                        "runOnEdit": True,
                        "substituteRegex": 0,
                        "minDepth": None,
                        "maxDepth": None,
                    }
                ]
            },
        },
    }
    site.call(site.tk.library.import_bytes(json.dumps(card).encode(), source="rhea.json"))
    chat = site.call(site.tk.chats.new_chat("Rhea")).id
    open_chat(page, chat)
    question = page.get_by_role("status").filter(has_text="embedded regex script")
    expect(question).to_be_visible()
    screenshot(page, "regex-card-question")
    site.upstream.script(Reply(text="My sword (OOC: lag) is ready."))
    turn(page, lambda: send(page, "A sword!"))
    expect(last_body(page)).to_have_text("My sword is ready.")  # display only: OOC hidden
    stored = stored_messages(site, chat)
    assert stored[-1]["mes"] == "My sword (OOC: lag) is ready."  # not allowed: unchanged

    question.get_by_role("button", name="Allow").click()
    expect(page.get_by_text("Rhea's regex scripts run now")).to_be_visible()
    site.upstream.script(Reply(text="The sword sings."))
    turn(page, lambda: send(page, "And now?"))
    expect(last_body(page)).to_have_text("The blade sings.")
    assert stored_messages(site, chat)[-2]["mes"] == "And now?"
    assert stored_messages(site, chat)[-1]["mes"] == "The blade sings."


def test_the_regex_screens_on_a_phone(browser: Browser, site: Site) -> None:
    context = browser.new_context(base_url=site.url, viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        page.goto("/#/regex")
        expect(page.get_by_role("heading", name="Regex scripts")).to_be_visible()
        page.get_by_label("Character").select_option(label="Mira")
        expect(page.get_by_text("Mira has no regex scripts of its own.")).to_be_visible()
        screenshot(page, "regex-list-phone")
        page.get_by_role("button", name="New script").click()
        expect(page.get_by_label("Script name")).to_be_visible()
        screenshot(page, "regex-editor-phone")
    finally:
        context.close()
