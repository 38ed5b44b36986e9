"""The chat tree in Chromium against a real server: a user regenerates a reply in the middle of
a chat, finds both continuations in the chat tree panel, switches between them, and sees the
chat and the prompt inspector follow each path; on a phone the panel opens from the chat
tools."""

from __future__ import annotations

import re

from playwright.sync_api import Browser, Page, expect

from chat._server import Reply

from ._pages import new_chat, open_chat, send, stored_messages, turn
from ._site import Site
from .conftest import screenshot


def _texts(site: Site, chat: str) -> list[str]:
    return [str(m["mes"]) for m in stored_messages(site, chat)]


def _inspect(page: Page) -> None:
    page.get_by_role("link", name="Prompt inspector").click()
    expect(page.locator(".summary")).to_contain_text("tokens")


def test_regenerate_a_middle_reply_and_switch_between_the_branches(page: Page, site: Site) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    chat = new_chat(site)
    open_chat(page, chat)
    tree = page.locator(".chat-tree")
    tree.locator("summary").click()
    expect(tree).to_contain_text("One path so far")
    for text, reply in (("Hello", "one"), ("Go on", "two"), ("And then?", "three")):
        site.upstream.script(Reply(text=f"The keeper says {reply}.", pace=0.01))
        turn(page, lambda text=text: send(page, text))
    expect(page.locator(".log .message")).to_have_count(7)

    # the middle reply (#4) again: a new branch; what followed it stays in the old one
    site.upstream.script(Reply(text="The keeper says two, retold.", pace=0.01))
    turn(page, lambda: page.get_by_role("button", name="Regenerate message 5").click())
    expect(page.locator(".log .message")).to_have_count(5)
    expect(page.locator(".log .message").last).to_contain_text("two, retold")
    expect(page.locator(".log")).not_to_contain_text("says three")
    sent = str(site.upstream.requests[-1].body)
    assert "says one" in sent and "says two." not in sent and "says three" not in sent

    point = tree.locator(".branch-point")
    expect(point).to_have_count(1)
    expect(point.get_by_role("heading")).to_have_text("At message #4")
    old = point.get_by_role("button", name=re.compile(r"Mira: The keeper says two\.$"))
    new = point.get_by_role("button", name=re.compile(r"shown Mira: .*two, retold"))
    expect(old).to_be_visible()
    expect(new).to_be_visible()
    expect(tree.locator("summary")).to_have_text("Chat tree (2 branches)")
    screenshot(page, "chat-tree-desktop")

    _inspect(page)
    expect(page.locator(".blocks")).to_contain_text("two, retold")
    expect(page.locator(".blocks")).not_to_contain_text("says three")
    page.go_back()
    expect(page.locator(".log .message")).to_have_count(5)

    # back to the first continuation: the whole old path, and its prompt
    page.locator(".chat-tree summary").click()
    page.get_by_role("button", name=re.compile(r"Mira: The keeper says two\.$")).click()
    expect(page.locator(".log .message")).to_have_count(7)
    expect(page.locator(".log .message").last).to_contain_text("The keeper says three.")
    expect(page.locator(".log")).not_to_contain_text("retold")
    expect(
        page.get_by_role("button", name=re.compile(r"shown Mira: The keeper says two\.$"))
    ).to_be_visible()
    assert _texts(site, chat)[-1] == "The keeper says three."
    _inspect(page)
    expect(page.locator(".blocks")).to_contain_text("The keeper says three.")
    expect(page.locator(".blocks")).not_to_contain_text("retold")
    page.go_back()

    # and to the new one again, from the message itself: its versions
    message = page.locator('.log .message[data-index="4"]')
    expect(message.locator(".versions")).to_have_text(re.compile("Version 1/2"))
    expect(page.get_by_role("button", name="Previous version of message 5")).to_be_disabled()
    page.get_by_role("button", name="Next version of message 5").click()
    expect(page.locator(".log .message")).to_have_count(5)
    expect(page.locator(".log .message").last).to_contain_text("two, retold")
    expect(message.locator(".versions")).to_have_text(re.compile("Version 2/2"))
    assert _texts(site, chat)[-1] == "The keeper says two, retold."
    screenshot(page, "chat-tree-versions-desktop")


def test_an_edited_message_sent_as_a_new_branch(page: Page, site: Site) -> None:
    chat = new_chat(site)
    open_chat(page, chat)
    for text, reply in (("Hello", "Hello, Ada."), ("Tell me of the tides", "They turn at six.")):
        site.upstream.script(Reply(text=reply, pace=0.01))
        turn(page, lambda text=text: send(page, text))
    page.get_by_role("button", name="Edit message 4").click()
    page.get_by_role("textbox", name="Edit message").fill("Tell me of the fog")
    site.upstream.script(Reply(text="It lifts by noon.", pace=0.01))
    turn(page, lambda: page.get_by_role("button", name="Send as new branch").click())
    expect(page.locator(".log .message")).to_have_count(5)
    expect(page.locator(".log .message").nth(3)).to_contain_text("Tell me of the fog")
    expect(page.locator(".log .message").last).to_contain_text("It lifts by noon.")
    assert _texts(site, chat)[3:] == ["Tell me of the fog", "It lifts by noon."]
    page.get_by_role("button", name="Chat tree").click()
    alternatives = page.locator(".chat-tree .branch-point")
    expect(alternatives.get_by_role("heading")).to_have_text("At message #3")
    expect(alternatives.get_by_role("button")).to_have_count(2)
    screenshot(page, "chat-tree-resent-desktop")
    page.get_by_role("button", name="Previous version of message 4").click()
    expect(page.locator(".log .message").last).to_contain_text("They turn at six.")
    assert _texts(site, chat)[3:] == ["Tell me of the tides", "They turn at six."]


def test_the_tree_panel_on_a_phone(browser: Browser, site: Site) -> None:
    context = browser.new_context(
        base_url=site.url, viewport={"width": 390, "height": 844}, is_mobile=True
    )
    page = context.new_page()
    page.set_default_timeout(10_000)
    try:
        chat = new_chat(site)
        store, owner = site.tk.store, site.tk.owner
        lines = [
            {"name": "Ada", "is_user": True, "mes": "Where does the path go?"},
            {"name": "Mira", "is_user": False, "mes": "Up to the lighthouse."},
        ]
        site.call(store.append_messages(chat, lines, owner=owner))
        site.call(site.tk.chats.fork(chat, 2))
        other = {"name": "Mira", "is_user": False, "mes": "Down to the harbour, past the nets."}
        site.call(store.append_message(chat, other, owner=owner))

        open_chat(page, chat)
        expect(page.locator(".log .message").last).to_contain_text("Down to the harbour")
        page.get_by_role("button", name="Chat tree").click()  # opens the tools at the tree
        up = page.get_by_role("button", name=re.compile("Mira: Up to the lighthouse"))
        expect(up).to_be_in_viewport()
        screenshot(page, "chat-tree-phone-panel")
        up.click()
        # the tools close to show the chat on its new path
        expect(page.locator(".log .message").last).to_contain_text("Up to the lighthouse.")
        expect(page.locator(".log .message").last).to_be_in_viewport()
        screenshot(page, "chat-tree-phone")
        page.get_by_role("button", name="Chat tree").click()
        expect(
            page.get_by_role("button", name=re.compile("shown Mira: Up to the lighthouse"))
        ).to_be_visible()
        assert _texts(site, chat)[-1] == "Up to the lighthouse."
    finally:
        context.close()
