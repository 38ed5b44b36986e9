"""The quick-reply bar in a real browser: the sets bound globally, to the chat and to the
character side by side; a button that runs a script, one that sends its text joined to what is
typed (injectInput), one that only fills the box (disableSend), a context menu of a linked
set, and replies that run on their own when the chat opens and after a reply; the phone
layout; binding sets in the chat's side panel."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Browser, Page, expect

from chat._server import Reply
from tavernkit.models.quick_reply import QuickReplySet
from tavernkit.quick_reply_bindings import QuickReplyBindings
from tavernkit.stscript import SetLink

from ._pages import new_chat, open_chat, send, stored_messages, turn
from ._site import Site
from .conftest import screenshot


def qr_set(name: str, *replies: dict[str, Any], **flags: Any) -> QuickReplySet:
    return QuickReplySet.model_validate(
        {
            "version": 2,
            "name": name,
            "disableSend": flags.get("disableSend", False),
            "placeBeforeInput": False,
            "injectInput": flags.get("injectInput", False),
            "color": "transparent",
            "onlyBorderColor": False,
            "qrList": [{"id": i + 1, **reply} for i, reply in enumerate(replies)],
            "idIndex": len(replies),
        }
    )


def _stock(site: Site) -> str:
    tk = site.tk
    sets = [
        qr_set(
            "Everywhere",
            {"label": "Wave", "message": "/echo waved at {{char}}"},
            {"label": "Opened", "message": "/setvar key=opened yes", "isHidden": True,
             "executeOnChatChange": True},
            {"label": "Count", "message": "/addvar key=replies 1 | /echo counted {{pipe}}",
             "isHidden": True,
             "executeOnAi": True},
        ),
        qr_set("Scene", {"label": "Look", "message": "I look around."}, injectInput=True),
        qr_set(
            "Mira's",
            {"label": "Draft", "message": "Maybe, {{char}}.",
             "contextList": [{"set": "Moods", "isChained": False}]},
            disableSend=True,
        ),
        qr_set("Moods", {"label": "Smile", "message": "/echo smiled"}),
    ]  # fmt: skip
    have = {info.name for info in site.call(tk.store.list("quick_reply_set", owner=tk.owner))}
    for item in sets:
        if item.name not in have:  # the module's site is shared by both tests
            site.call(tk.store.put("quick_reply_set", item, owner=tk.owner, name=item.name))
    settings = site.call(tk.settings())
    settings.selections.quick_reply_sets = ["Everywhere"]
    site.call(tk.store.put_settings(settings, owner=tk.owner))
    chat = new_chat(site)
    # the chat's and the character's bindings (what PUT /chats/{id}/quick-replies and
    # PUT /characters/{ref}/quick-replies store)
    bindings = QuickReplyBindings(tk.store, tk.owner)
    site.call(bindings.bind_chat(chat, [SetLink("Scene")]))
    site.call(bindings.bind_character("Mira", ["Mira's"]))
    return chat


def _variables(site: Site, chat: str) -> dict[str, Any]:
    stored = site.call(site.tk.store.load_chat(chat, owner=site.tk.owner))
    return dict(stored.header["chat_metadata"].get("variables") or {})


def test_the_bar_runs_scripts_sends_fills_the_box_and_opens_menus(page: Page, site: Site) -> None:
    chat = _stock(site)
    open_chat(page, chat)
    bar = page.get_by_role("toolbar", name="Quick replies")
    groups = bar.get_by_role("group")
    expect(groups).to_have_count(3)
    expect(groups.nth(0)).to_have_accessible_name("Everywhere")
    expect(groups.nth(1)).to_have_accessible_name("Scene")
    expect(groups.nth(2)).to_have_accessible_name("Mira's")
    expect(bar.get_by_role("button", name="Opened")).to_have_count(0)  # hidden replies

    bar.get_by_role("button", name="Wave").click()
    expect(page.locator(".alerts").get_by_text("waved at Mira")).to_be_visible()
    assert _variables(site, chat).get("opened") == "yes"  # executeOnChatChange, on opening

    box = page.get_by_label("Message", exact=True)
    box.fill("Quietly,")
    site.upstream.script(Reply(text="Lanterns sway.", pace=0.01))
    turn(page, bar.get_by_role("button", name="Look").click)
    texts = [m["mes"] for m in stored_messages(site, chat)]
    assert texts[-2:] == ["Quietly, I look around.", "Lanterns sway."]  # injectInput
    expect(box).to_have_value("")
    expect(page.locator(".log .message").last).to_contain_text("Lanterns sway.")
    assert "replies" not in _variables(site, chat)  # a reply's own send (preventAutoExecute)
    # a typed message's reply sets off executeOnAi
    site.upstream.script(Reply(text="Still here.", pace=0.01))
    turn(page, lambda: send(page, "Hello?"))
    expect(page.locator(".alerts").get_by_text("counted 1")).to_be_visible()
    assert _variables(site, chat).get("replies") == 1
    texts = [m["mes"] for m in stored_messages(site, chat)]

    bar.get_by_role("button", name="Draft", exact=True).click()
    expect(box).to_have_value("Maybe, Mira. ")  # disableSend: only the box
    assert len(stored_messages(site, chat)) == len(texts)

    more = bar.get_by_role("button", name="More: Draft")
    more.click()
    expect(more).to_have_attribute("aria-expanded", "true")
    menu = bar.get_by_role("menu", name="Draft")
    expect(menu).to_be_visible()
    screenshot(page, "quick-reply-bar")
    menu.get_by_role("menuitem", name="Smile").click()
    expect(menu).to_be_hidden()
    expect(page.locator(".alerts").get_by_text("smiled")).to_be_visible()

    # the side panel binds sets: Scene off this chat, Moods on everywhere
    side = page.get_by_role("complementary", name="Chat tools")
    side.get_by_text("Quick reply sets", exact=True).click()
    side.get_by_role("group", name="Scene").get_by_label("This chat").uncheck()
    expect(bar.get_by_role("group", name="Scene")).to_have_count(0)
    side.get_by_role("group", name="Moods").get_by_label("Everywhere").check()
    expect(bar.get_by_role("group", name="Moods")).to_be_visible()
    expect(side.get_by_role("group", name="Mira's").get_by_label("Mira")).to_be_checked()
    screenshot(page, "quick-reply-sets-panel")
    settings = site.call(site.tk.settings())
    assert settings.selections.quick_reply_sets == ["Everywhere", "Moods"]
    stored = site.call(site.tk.store.load_chat(chat, owner=site.tk.owner))
    assert stored.header["chat_metadata"]["quickReply"] == {"setList": []}


def test_the_bar_on_a_phone(browser: Browser, site: Site) -> None:
    chat = _stock(site)
    context = browser.new_context(base_url=site.url, viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        open_chat(page, chat)
        bar = page.get_by_role("toolbar", name="Quick replies")
        expect(bar.get_by_role("group")).to_have_count(3)
        bar.get_by_role("button", name="More: Draft").click()
        expect(bar.get_by_role("menuitem", name="Smile")).to_be_visible()
        screenshot(page, "quick-reply-bar-phone")
    finally:
        context.close()
