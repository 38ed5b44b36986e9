"""A group chat's tree in Chromium against a real server: the user regenerates a reply in the
middle of a group chat; the member who wrote it speaks again on a new branch, the old
continuation stays in the chat tree, and the user steps between the two (desktop and phone)."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from chat._server import Reply

from ._pages import send, stored_messages, turn
from ._site import Site
from .conftest import screenshot
from .test_group_chat import DESKTOP, PHONE, add_crew, make_group, names


def _texts(site: Site, chat: str) -> list[str]:
    return [str(m["mes"]) for m in stored_messages(site, chat)]


def test_regenerate_a_middle_reply_of_a_group_chat_and_step_between_branches(
    page: Page, site: Site
) -> None:
    page.set_viewport_size(DESKTOP)
    add_crew(site)
    chat = make_group(site, "Deckhands", ["Mira", "Finn"])
    page.goto(f"/#/chat/{chat}")
    expect(page.locator(".log .message")).to_have_count(2)
    for text, mira, finn in (
        ("Hello, crew!", "Ropes are coiled.", "The anchor is up."),
        ("What next?", "We set the sails.", "The tide is with us."),
    ):
        site.upstream.script(Reply(text=mira, pace=0.01), Reply(text=finn, pace=0.01))
        turn(page, lambda text=text: send(page, text))
    expect(page.locator(".log .message")).to_have_count(8)

    # Finn's first reply (#4) again: Finn alone speaks, on a new branch of the chat
    site.upstream.script(Reply(text="The anchor is up, and stowed.", pace=0.01))
    turn(page, lambda: page.get_by_role("button", name="Regenerate message 5").click())
    expect(page.locator(".log .message")).to_have_count(5)
    expect(page.locator(".log .message").last).to_contain_text("The anchor is up, and stowed.")
    expect(page.locator(".log")).not_to_contain_text("set the sails")
    assert names(page)[-2:] == ["Mira", "Finn"]
    sent = str(site.upstream.requests[-1].body)
    assert "Ropes are coiled." in sent and "set the sails" not in sent

    page.get_by_role("button", name="Chat tree").click()
    tree = page.locator(".chat-tree")
    expect(tree.locator("summary")).to_have_text("Chat tree (2 branches)")
    point = tree.locator(".branch-point")
    expect(point.get_by_role("heading")).to_have_text("At message #4")
    for name in (r"Finn: The anchor is up\.$", r"shown Finn: .*and stowed"):
        expect(point.get_by_role("button", name=re.compile(name))).to_be_visible()
    message = page.locator('.log .message[data-index="4"]')
    expect(message.locator(".versions")).to_have_text(re.compile("Version 2/2"))
    screenshot(page, "group-branches-desktop")

    # the old path, whole, from the message's versions
    page.get_by_role("button", name="Previous version of message 5").click()
    expect(page.locator(".log .message")).to_have_count(8)
    expect(page.locator(".log .message").last).to_contain_text("The tide is with us.")
    assert _texts(site, chat)[4:] == [
        "The anchor is up.",
        "What next?",
        "We set the sails.",
        "The tide is with us.",
    ]

    # on a phone: the new branch again from the chat tree in the tools
    page.set_viewport_size(PHONE)
    page.reload()
    expect(page.locator(".log .message")).to_have_count(8)
    page.get_by_role("button", name="Chat tree").click()
    stowed = page.get_by_role("button", name=re.compile(r"Finn: .*and stowed"))
    expect(stowed).to_be_in_viewport()
    screenshot(page, "group-branches-phone-tree")
    stowed.click()
    expect(page.locator(".log .message")).to_have_count(5)
    expect(page.locator(".log .message").last).to_contain_text("and stowed")
    screenshot(page, "group-branches-phone")
    assert _texts(site, chat)[-1] == "The anchor is up, and stowed."
