"""Quick replies that run by themselves, and a script's question that outlives a reload, in a
real browser: a page reloaded while a script's /input is open asks it again and the answer
goes on with the script; /popup header= shows its heading; the global sets' "execute on
startup" replies run once per page load (on its first chat; the chat's own sets' do not);
"execute on new chat" runs on a chat made with New chat, not on one opened; desktop and
phone."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Browser, Page, expect

from tavernkit.models.quick_reply import QuickReplySet
from tavernkit.quick_reply_bindings import QuickReplyBindings
from tavernkit.stscript import SetLink

from ._pages import new_chat, open_chat
from ._site import Site
from .conftest import screenshot


def qr_set(name: str, *replies: dict[str, Any]) -> QuickReplySet:
    return QuickReplySet.model_validate(
        {
            "version": 2,
            "name": name,
            "qrList": [{"id": i + 1, **reply} for i, reply in enumerate(replies)],
            "idIndex": len(replies),
        }
    )


def _stock(site: Site) -> None:
    """The global set "Boot" (a startup, a new-chat and a chat-change reply, hidden; startup
    runs before chat change, as SillyTavern's app start before its first chat), the set "Asks"
    with a reply that asks (bound to each chat) and "Local" with a startup reply of its own."""
    tk = site.tk
    sets = [
        qr_set(
            "Boot",
            {"label": "Started", "message": "/addvar key=boots 1", "isHidden": True,
             "executeOnStartup": True},
            {"label": "Fresh", "message": "/setvar key=fresh yes", "isHidden": True,
             "executeOnNewChat": True},
            {"label": "Opened", "message": "/addvar key=opened 1", "isHidden": True,
             "executeOnChatChange": True},
        ),
        qr_set(
            "Asks",
            {"label": "Name",
             "message": "/input default=Bo What is your name? | /setvar key=name {{pipe}}"},
            {"label": "Note", "message": '/popup header="Chapter 2" The road forks.'},
        ),
        qr_set(
            "Dice",
            {"label": "Double",
             "message": "/mul {{pipe}} 2 | /setvar key=rolled %%parent%% {{pipe}}"},
        ),
        qr_set(
            "Roll",
            {"label": "Six", "message": "/pass 6",
             "contextList": [{"set": "Dice", "isChained": True}]},
        ),
        qr_set(
            "Local",
            {"label": "Mine", "message": "/setvar key=local yes", "isHidden": True,
             "executeOnStartup": True},
        ),
    ]  # fmt: skip
    have = {info.name for info in site.call(tk.store.list("quick_reply_set", owner=tk.owner))}
    for item in sets:
        if item.name not in have:  # the module's site is shared by its tests
            site.call(tk.store.put("quick_reply_set", item, owner=tk.owner, name=item.name))
    settings = site.call(tk.settings())
    settings.selections.quick_reply_sets = ["Boot"]
    site.call(tk.store.put_settings(settings, owner=tk.owner))


def _chat(site: Site) -> str:
    chat = new_chat(site)
    bindings = QuickReplyBindings(site.tk.store, site.tk.owner)
    site.call(bindings.bind_chat(chat, [SetLink("Asks"), SetLink("Local")]))
    return chat


def _variables(site: Site, chat: str) -> dict[str, Any]:
    stored = site.call(site.tk.store.load_chat(chat, owner=site.tk.owner))
    return dict(stored.header["chat_metadata"].get("variables") or {})


def _wait_for(page: Page, check: Any) -> None:
    for _ in range(200):  # 10 s
        if check():
            return
        page.wait_for_timeout(50)
    assert check()


def test_a_question_open_at_a_reload_is_asked_again(page: Page, site: Site) -> None:
    _stock(site)
    chat = _chat(site)
    open_chat(page, chat)
    page.get_by_role("toolbar", name="Quick replies").get_by_role("button", name="Name").click()
    dialog = page.get_by_role("dialog", name="What is your name?")
    expect(dialog).to_be_visible()

    page.reload()
    dialog = page.get_by_role("dialog", name="What is your name?")
    expect(dialog).to_be_visible()  # the script still waits: its question again
    box = dialog.get_by_role("textbox", name="What is your name?")
    expect(box).to_have_value("Bo")
    expect(box).to_be_focused()
    screenshot(page, "question-after-reload")
    box.fill("Ada")
    dialog.get_by_role("button", name="OK").click()
    expect(dialog).to_be_hidden()
    _wait_for(page, lambda: _variables(site, chat).get("name") == "Ada")
    page.reload()  # answered: nothing asks again
    expect(page.locator(".log .message").first).to_be_visible()
    expect(page.get_by_role("dialog")).to_have_count(0)

    # /popup header=: a heading above the text
    page.get_by_role("toolbar", name="Quick replies").get_by_role("button", name="Note").click()
    note = page.get_by_role("dialog", name="The road forks.")
    expect(note.get_by_role("heading", name="Chapter 2")).to_be_visible()
    screenshot(page, "popup-header")
    note.get_by_role("button", name="OK").click()
    expect(note).to_be_hidden()


def test_startup_replies_run_once_per_page_load(page: Page, site: Site) -> None:
    _stock(site)
    first, second = _chat(site), _chat(site)
    open_chat(page, first)
    _wait_for(page, lambda: _variables(site, first).get("boots") == 1)
    assert "local" not in _variables(site, first)  # only the global sets' run at startup
    assert "fresh" not in _variables(site, first)  # opened, not made here

    page.evaluate("(id) => { window.location.hash = `#/chat/${id}`; }", second)
    _wait_for(page, lambda: _variables(site, second).get("opened") == 1)  # after startup's turn
    assert "boots" not in _variables(site, second)  # the same page load: not again

    page.reload()
    _wait_for(page, lambda: _variables(site, second).get("boots") == 1)
    _wait_for(page, lambda: _variables(site, second).get("opened") == 2)


def test_a_new_chat_runs_its_new_chat_replies(browser: Browser, site: Site) -> None:
    _stock(site)
    chat = _chat(site)
    phone = {"width": 390, "height": 844}
    context = browser.new_context(base_url=site.url, locale="en-US", viewport=phone)
    page = context.new_page()
    try:
        open_chat(page, chat)
        page.get_by_role("button", name="Chat tools").click()
        side = page.get_by_role("complementary", name="Chat tools")
        side.get_by_text("Chats", exact=True).click()
        side.get_by_role("button", name="New chat").click()
        page.wait_for_url(lambda url: "#/chat/" in url and chat not in url)
        made = page.url.split("#/chat/")[1]
        expect(page.locator(".log .message").first).to_be_visible()
        _wait_for(page, lambda: _variables(site, made).get("fresh") == "yes")
        assert "fresh" not in _variables(site, chat)
        screenshot(page, "new-chat-phone")

        # the phone's dialog: a question open at a reload, asked again
        bindings = QuickReplyBindings(site.tk.store, site.tk.owner)
        site.call(bindings.bind_chat(made, [SetLink("Asks")]))
        page.reload()
        page.get_by_role("toolbar", name="Quick replies").get_by_role("button", name="Name").click()
        expect(page.get_by_role("dialog", name="What is your name?")).to_be_visible()
        page.reload()
        dialog = page.get_by_role("dialog", name="What is your name?")
        expect(dialog).to_be_visible()
        screenshot(page, "question-after-reload-phone")
        dialog.get_by_role("button", name="Cancel").click()
        _wait_for(page, lambda: _variables(site, made).get("name") == "")
    finally:
        context.close()


def test_a_chained_menu_entry_runs_after_its_parent(page: Page, site: Site) -> None:
    _stock(site)
    chat = new_chat(site)
    site.call(QuickReplyBindings(site.tk.store, site.tk.owner).bind_chat(chat, [SetLink("Roll")]))
    open_chat(page, chat)
    bar = page.get_by_role("toolbar", name="Quick replies")
    bar.get_by_role("button", name="More: Six").click()
    bar.get_by_role("menu", name="Six").get_by_role("menuitem", name="Double").click()
    # /pass 6 | /mul {{pipe}} 2 | /setvar key=rolled Six 12
    _wait_for(page, lambda: _variables(site, chat).get("rolled") == "Six 12")
