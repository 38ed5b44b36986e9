"""A card with its own regex scripts, as SillyTavern 1.18 runs it, in a real browser: the card
of the regex goldens' import case (``rx_import_card_embedded``: a V2 JSON card whose
``data.extensions.regex_scripts`` hold a stored script and a prompt-only one) imported on the
characters screen, its scripts off while SillyTavern's question is open, allowed, and then the
stored texts, the prompt the model received and what the screen shows (the display-only
scripts of the golden ``rx_store_cc_reply_markdown``) as SillyTavern has them.

Skipped without the conformance material (``TAVERNKIT_CONFORMANCE_DIR``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from chat._server import Reply

from ._pages import last_body, send, stored_messages, turn
from ._site import Site
from .conftest import screenshot

ROOT = os.environ.get("TAVERNKIT_CONFORMANCE_DIR")
if not ROOT:
    pytest.skip("TAVERNKIT_CONFORMANCE_DIR is not set", allow_module_level=True)
GOLDENS = Path(ROOT) / "st-1.18" / "regex"


def golden(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GOLDENS / f"{name}.json").read_text(encoding="utf-8"))
    return data


#: the chat the first journey opened (the phone view looks at it again)
OPENED: dict[str, str] = {}
CARD_CASE = golden("rx_import_card_embedded")
DISPLAY_CASE = golden("rx_store_cc_reply_markdown")


def _after_allow(text: str, prompt: bool = False) -> str:
    """What SillyTavern's engine gave for ``text`` (AI output) once the card was allowed."""
    params = {"isPrompt": True} if prompt else {}
    for call in CARD_CASE["outputs_after_allow"]:
        if call["input"] == text and call["params"] == params:
            return str(call["output"])
    raise AssertionError(f"the golden has no call for {text!r} {params}")


def _card_file(tmp_path: Path) -> Path:
    name = Path(CARD_CASE["avatar"]).stem  # Rhea
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": name,
            "description": f"{name} keeps the armoury.",
            "personality": "",
            "scenario": "",
            "first_mes": "Welcome to the armoury.",
            "mes_example": "",
            "extensions": {"regex_scripts": CARD_CASE["card_scripts"]},
        },
    }
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(card), encoding="utf-8")
    return path


def _display_scripts(site: Site) -> None:
    """The golden's display-only scripts (quotes as <q>, OOC notes hidden) as global ones."""
    for script in site.call(site.tk.regex.scripts()):
        site.call(site.tk.regex.delete(script.id))
    for script in DISPLAY_CASE["inputs"]["scripts"]["global"]:
        if script["markdownOnly"]:
            site.call(site.tk.regex.add(dict(script)))


def _prompt_texts(site: Site) -> list[str]:
    return [m["content"] for m in site.upstream.requests[-1].body["messages"]]


def test_a_cards_scripts_are_off_until_allowed_then_run_as_in_sillytavern(
    page: Page, site: Site, tmp_path: Path
) -> None:
    _display_scripts(site)
    page.goto("/#/characters")
    page.get_by_label("Files to import").set_input_files(str(_card_file(tmp_path)))
    expect(page.get_by_text("Imported Rhea")).to_be_visible()
    page.get_by_role("button", name="Chat with Rhea").click()
    expect(page.locator(".log .message").first).to_be_visible()
    chat = page.url.split("#/chat/")[1]
    OPENED["chat"] = chat

    # SillyTavern's question; until it is answered the card's scripts do not run
    question = page.get_by_role("status").filter(has_text="embedded regex script")
    # SillyTavern's words, less its pointer to its own extensions menu
    asked = CARD_CASE["popup_text_on_select"].split(" If you want")[0]
    expect(question).to_contain_text(asked)
    screenshot(page, "regex-card-golden-question")
    site.upstream.script(Reply(text="My sword!", pace=0.01))
    turn(page, lambda: send(page, "a SWORD"))
    assert [m["mes"] for m in stored_messages(site, chat)][-2:] == ["a SWORD", "My sword!"]
    assert _prompt_texts(site)[-1] == "a SWORD"  # no prompt-only " [card]" either
    expect(last_body(page)).to_have_text("My sword!")

    question.get_by_role("button", name="Allow").click()
    expect(page.get_by_text("Rhea's regex scripts run now")).to_be_visible()
    reply = 'She said "hi" to the sword. [OOC: meta]'
    site.upstream.script(Reply(text=reply, pace=0.01))
    turn(page, lambda: send(page, "My sword!"))

    # stored as SillyTavern stores it: the plain card script on both texts
    stored = [m["mes"] for m in stored_messages(site, chat)]
    assert stored[-2] == _after_allow("My sword!")  # "My blade!"
    assert stored[-1] == 'She said "hi" to the blade. [OOC: meta]'
    # the prompt: stored text plus the prompt-only card script, on every message it reaches
    prompt = _prompt_texts(site)
    assert _after_allow("My sword!", prompt=True) == "My sword! [card]"
    assert prompt[-3:] == ["a SWORD [card]", "My sword! [card]", "My blade! [card]"]
    # on screen: the display-only scripts (quotes as <q>, the OOC note gone), stored text kept
    shown = last_body(page)
    expect(shown).to_have_text("She said hi to the blade.")
    expect(shown.locator("q")).to_have_text("hi")
    expect(shown).not_to_contain_text("OOC")
    screenshot(page, "regex-card-allowed")


def test_the_allowed_card_on_a_phone(browser: Browser, site: Site) -> None:
    context = browser.new_context(base_url=site.url, viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        if "chat" not in OPENED:
            pytest.skip("the journey above did not open its chat")
        page.goto(f"/#/chat/{OPENED['chat']}")
        shown = page.locator(".log .message").last.locator(".body")
        expect(shown).to_have_text("She said hi to the blade.")
        expect(shown.locator("q")).to_have_text("hi")
        screenshot(page, "regex-card-phone")
    finally:
        context.close()
