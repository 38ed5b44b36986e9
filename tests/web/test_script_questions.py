"""Scripts that ask the user, in a real browser: a Quick Reply whose script asks with /input
and /sends the answer, a /buttons choice, a cancelled question (Escape), a typed /popup, an
/echo that waits to be dismissed; the
dialog is a labelled modal that keeps the focus; desktop and phone."""

from __future__ import annotations

from playwright.sync_api import Browser, Page, expect

from tavernkit.models.quick_reply import QuickReplySet
from tavernkit.quick_reply_bindings import QuickReplyBindings
from tavernkit.stscript import SetLink

from ._pages import new_chat, open_chat, send, stored_messages
from ._site import Site
from .conftest import screenshot

REPLIES = [
    ("Name", "/input default=Traveller okButton=Go What is your name? | /send I am {{pipe}}."),
    ("Path", '/buttons labels=["North","South"] Which way? | /sendas name=Mira You go {{pipe}}.'),
    ("Whisper", "/input Say something | /echo got [{{pipe}}]"),
]


def _chat(site: Site) -> str:
    tk = site.tk
    qr_set = QuickReplySet.model_validate(
        {
            "version": 2,
            "name": "Adventure",
            "qrList": [
                {"id": i + 1, "label": label, "message": message}
                for i, (label, message) in enumerate(REPLIES)
            ],
            "idIndex": len(REPLIES),
        }
    )
    have = {info.name for info in site.call(tk.store.list("quick_reply_set", owner=tk.owner))}
    if "Adventure" not in have:
        site.call(tk.store.put("quick_reply_set", qr_set, owner=tk.owner, name="Adventure"))
    chat = new_chat(site)
    site.call(QuickReplyBindings(tk.store, tk.owner).bind_chat(chat, [SetLink("Adventure")]))
    return chat


def _focus_in_dialog(page: Page) -> bool:
    return bool(page.evaluate("() => Boolean(document.activeElement?.closest('dialog'))"))


def test_a_quick_reply_asks_and_sends_the_answer(page: Page, site: Site) -> None:
    chat = _chat(site)
    open_chat(page, chat)
    bar = page.get_by_role("toolbar", name="Quick replies")

    bar.get_by_role("button", name="Name").click()
    dialog = page.get_by_role("dialog", name="What is your name?")
    expect(dialog).to_be_visible()
    box = dialog.get_by_role("textbox", name="What is your name?")
    expect(box).to_have_value("Traveller")
    expect(box).to_be_focused()
    for _ in range(4):  # Tab goes round inside the dialog
        page.keyboard.press("Tab")
        assert _focus_in_dialog(page)
    box.fill("Ada")
    screenshot(page, "script-question-input")
    dialog.get_by_role("button", name="Go").click()
    expect(dialog).to_have_count(0)
    expect(page.locator(".log .message").last).to_contain_text("I am Ada.")
    assert stored_messages(site, chat)[-1]["mes"] == "I am Ada."

    bar.get_by_role("button", name="Path").click()
    choice = page.get_by_role("dialog", name="Which way?")
    expect(choice.get_by_role("button", name="North")).to_be_focused()
    screenshot(page, "script-question-buttons")
    choice.get_by_role("button", name="South").click()
    expect(page.locator(".log .message").last).to_contain_text("You go South.")

    # Escape is Cancel: /input returns ''
    bar.get_by_role("button", name="Whisper").click()
    expect(page.get_by_role("dialog", name="Say something")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.get_by_role("dialog")).to_have_count(0)
    expect(page.locator(".alerts").get_by_text("got []")).to_be_visible()

    # a typed script asks too: /popup's second button is 0
    send(page, "/popup result=true okButton=Yes cancelButton=No Ready?")
    popup = page.get_by_role("dialog", name="Ready?")
    popup.get_by_role("button", name="No").click()
    expect(page.locator(".alerts").get_by_text("0", exact=True)).to_be_visible()

    # /echo awaitDismissal: the script goes on once its note is dismissed
    send(page, "/echo awaitDismissal=true title=Note Read this first | /pass read")
    note = page.get_by_role("dialog", name="Read this first")
    expect(note.get_by_role("heading", name="Note")).to_be_visible()
    expect(page.locator(".alerts").get_by_text("read", exact=True)).to_have_count(0)
    note.get_by_role("button", name="Dismiss").click()
    expect(page.locator(".alerts").get_by_text("read", exact=True)).to_be_visible()


def test_questions_on_a_phone(browser: Browser, site: Site) -> None:
    chat = _chat(site)
    context = browser.new_context(base_url=site.url, viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        open_chat(page, chat)
        bar = page.get_by_role("toolbar", name="Quick replies")
        bar.get_by_role("button", name="Name").click()
        dialog = page.get_by_role("dialog", name="What is your name?")
        expect(dialog).to_be_visible()
        box = dialog.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
        screenshot(page, "script-question-input-phone")
        dialog.get_by_role("button", name="Cancel").click()
        bar.get_by_role("button", name="Path").click()
        choice = page.get_by_role("dialog", name="Which way?")
        screenshot(page, "script-question-buttons-phone")
        choice.get_by_role("button", name="North").click()
        expect(page.locator(".log .message").last).to_contain_text("You go North.")
    finally:
        context.close()
