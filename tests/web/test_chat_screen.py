"""The chat screen's first-session bugs (issue 33), each as a user meets it in Chromium against
a real server: an error that stays until dismissed (with a retry), the newest text in view
while streaming (and "Jump to newest" when scrolled up), the user's message above the reply,
a reload mid-stream that shows the reply once, stopped replies marked, the inspector speaking
as the persona picked in the chat, an import conflict a browser user can resolve, and a
20,000-message chat that opens at once and scrolls back to its first message with a small
page."""

from __future__ import annotations

import io
import json
import re
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image
from playwright.sync_api import Browser, Page, expect

from chat._server import HangReply, Reply
from tavernkit.chat.personas import Personas
from tavernkit.chat.quick_replies import QuickReplies
from tavernkit.models.profile import ConnectionProfile

from ._pages import last_body, new_chat, open_chat, send, stored_messages, turn
from ._site import Site
from .conftest import screenshot


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def select_profile(site: Site, name: str) -> None:
    settings = await site.tk.settings()
    settings.selections.profile = name
    await site.tk.store.put_settings(settings, owner=site.tk.owner)


@pytest.fixture
def dead_profile(site: Site) -> Iterator[None]:
    """The selected profile points at a dead URL for the test, the scripted one after it."""
    dead = ConnectionProfile(
        name="dead",
        api="chat",
        source="openai",
        base_url=f"http://127.0.0.1:{closed_port()}/v1",
        model="m1",
    )
    site.call(site.tk.store.put("connection_profile", dead, owner=site.tk.owner))
    site.call(select_profile(site, "dead"))
    try:
        yield
    finally:
        site.call(select_profile(site, "scripted"))


def alert(page: Page) -> Any:
    return page.locator(".alerts .alert")


def test_a_dead_profiles_error_stays_with_a_retry(
    page: Page, site: Site, dead_profile: None
) -> None:
    chat = new_chat(site)
    open_chat(page, chat)
    turn(page, lambda: send(page, "Anyone there?"), timeout=30_000)
    # the error is in the chat after the turn's end and the chat's reload, and stays there
    expect(alert(page)).to_have_count(1)
    expect(alert(page)).to_contain_text("Generation failed: network")
    expect(alert(page)).to_have_attribute("role", "alert")
    page.wait_for_timeout(1500)
    expect(alert(page)).to_be_visible()
    # the user's message was stored once, and is shown
    assert [m["mes"] for m in stored_messages(site, chat)] == [
        "Welcome aboard, Ada.",
        "Anyone there?",
    ]
    expect(last_body(page)).to_have_text("Anyone there?")
    screenshot(page, "chat-error")

    # fixed profile, Retry: the reply comes, to the message already stored
    site.call(select_profile(site, "scripted"))
    site.upstream.script(Reply(text="I am here.", pace=0.01))
    turn(page, alert(page).get_by_role("button", name="Retry").click)
    expect(alert(page)).to_have_count(0)
    expect(last_body(page)).to_have_text("I am here.")
    assert [m["mes"] for m in stored_messages(site, chat)] == [
        "Welcome aboard, Ada.",
        "Anyone there?",
        "I am here.",
    ]


def test_a_refused_action_stays_until_dismissed(page: Page, site: Site) -> None:
    chat = new_chat(site)
    open_chat(page, chat)
    page.get_by_role("button", name="Regenerate").click()
    expect(alert(page)).to_contain_text("the greeting cannot be regenerated")
    page.wait_for_timeout(1500)
    expect(alert(page)).to_be_visible()
    # a refusal as such is not retried: there is nothing to retry
    expect(alert(page).get_by_role("button", name="Retry")).to_have_count(0)
    alert(page).get_by_role("button", name="Dismiss").click()
    expect(alert(page)).to_have_count(0)


def add_messages(site: Site, chat: str, count: int, words: int = 30) -> None:
    """``count`` stored messages, alternating speakers, each ``words`` words long."""
    filler = " ".join(["word"] * words)
    docs = [
        {
            "name": "Ada" if n % 2 == 0 else "Mira",
            "is_user": n % 2 == 0,
            "mes": f"Message {n + 1}. {filler}",
        }
        for n in range(count)
    ]
    site.call(site.tk.store.append_messages(chat, docs, owner=site.tk.owner))


def in_view(page: Page, selector: str) -> bool:
    """Whether the element's bottom edge is inside the message box and above the composer."""
    return bool(
        page.evaluate(
            """(selector) => {
                const el = [...document.querySelectorAll(selector)].pop();
                const box = document.querySelector(".log").getBoundingClientRect();
                const composer = document.querySelector(".composer").getBoundingClientRect();
                const r = el.getBoundingClientRect();
                const bottom = Math.min(box.bottom, composer.top) + 1;
                return r.bottom <= bottom && r.bottom > box.top;
            }""",
            selector,
        )
    )


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_newest_text_stays_in_view_while_streaming(
    browser: Browser, site: Site, size: str
) -> None:
    viewport = (
        {"width": 1280, "height": 720} if size == "desktop" else {"width": 390, "height": 844}
    )
    context = browser.new_context(base_url=site.url, viewport=viewport, is_mobile=size == "phone")
    page = context.new_page()
    page.set_default_timeout(10_000)
    try:
        chat = new_chat(site)
        add_messages(site, chat, 40)
        open_chat(page, chat)
        expect(page.locator(".log .message").last).to_contain_text("Message 40.")
        assert in_view(page, ".log .message")
        pieces = [f"Line {n} of the tide table. " for n in range(60)]
        site.upstream.script(HangReply(text="".join(pieces), chunks=pieces, hang_after=30))
        send(page, "Read me the tide table.")
        expect(page.locator(".log .live .body")).to_contain_text("Line 29 of the tide table.")
        assert in_view(page, ".log .live")
        screenshot(page, f"chat-streaming-{size}")

        # scrolled up, the view stays put while text arrives, and "Jump to newest" is offered
        page.locator(".log").evaluate("(log) => { log.scrollTop = 0; }")
        jump = page.get_by_role("button", name="Jump to newest")
        expect(jump).to_be_visible()
        top = page.locator(".log").evaluate("(log) => log.scrollTop")
        site.call(release(site))
        expect(page.locator(".log").locator(".message").last).to_contain_text("Line 59")
        assert page.locator(".log").evaluate("(log) => log.scrollTop") >= top
        assert not in_view(page, ".log .message")
        jump.click()
        expect(jump).to_be_hidden()
        assert in_view(page, ".log .message")
        expect(last_body(page)).to_contain_text("Line 59 of the tide table.")
    finally:
        site.call(hold(site))
        context.close()


async def release(site: Site) -> None:
    site.upstream.release.set()


async def hold(site: Site) -> None:
    site.upstream.release.clear()


def test_the_users_message_is_above_the_reply_and_a_reload_shows_it_once(
    page: Page, site: Site
) -> None:
    chat = new_chat(site)
    open_chat(page, chat)
    site.call(hold(site))
    site.upstream.script(HangReply(text="First. Second. Third.", hang_after=1))
    send(page, "Count.")
    expect(page.locator(".log .live .body")).to_have_text("First.")
    order = page.locator(".log > li").evaluate_all(
        "(items) => items.filter((li) => !li.hidden).map((li) => li.innerText)"
    )
    assert "Count." in order[-2] and "First." in order[-1]
    page.reload()
    expect(page.locator(".log .live .body")).to_have_text("First.")
    # the stored place of the reply is not shown beside the live one
    shown = page.locator(".log > li:visible").filter(has_text="First.")
    expect(shown).to_have_count(1)
    turn(page, lambda: site.call(release(site)))
    expect(page.locator(".log > li:visible").filter(has_text="First.")).to_have_count(1)
    expect(last_body(page)).to_have_text("First. Second. Third.")
    site.call(hold(site))


def test_a_stopped_reply_is_marked(page: Page, site: Site) -> None:
    chat = new_chat(site)
    open_chat(page, chat)
    site.call(hold(site))
    site.upstream.script(HangReply(text="Wait. the rest never comes", hang_after=1))
    send(page, "Go on.")
    expect(page.locator(".log .live .body")).to_have_text("Wait.")
    turn(page, page.get_by_role("button", name="Stop").click)
    expect(page.locator(".log .message").last.locator(".status")).to_have_text(
        "[stopped before the end]"
    )
    page.reload()
    expect(page.locator(".log .message").last.locator(".status")).to_have_text(
        "[stopped before the end]"
    )
    site.call(release(site))


def test_the_inspector_speaks_as_the_persona_picked_in_the_chat(page: Page, site: Site) -> None:
    personas = Personas(site.tk.store, owner=site.tk.owner)
    if "Corin" not in {p.name for p in site.call(personas.list())}:
        site.call(personas.create("Corin", "{{user}} keeps the harbour's ledgers."))
    chat = new_chat(site)
    open_chat(page, chat)
    page.get_by_label("Persona").select_option("Corin")
    page.get_by_role("link", name="Prompt inspector").click()
    expect(page.locator(".blocks")).to_contain_text("Corin keeps the harbour's ledgers.")
    expect(page.locator(".summary")).to_contain_text("as Corin")
    page.go_back()
    page.get_by_label("Persona").select_option("")
    page.get_by_role("link", name="Prompt inspector").click()
    expect(page.locator(".summary")).to_contain_text("tokens")
    expect(page.locator(".blocks")).not_to_contain_text("harbour's ledgers")


def test_a_long_chat_opens_at_its_newest_and_scrolls_back_to_the_first(
    page: Page, site: Site
) -> None:
    chat = new_chat(site)
    add_messages(site, chat, 19_999, words=8)  # with the greeting: 20,000 messages
    page.goto(f"/#/chat/{chat}")
    expect(page.locator(".log .message").last).to_contain_text("Message 19999.")
    log = page.locator(".log")
    most = 0
    # a page of older messages a scroll: a deadline, not a count of tries, so a loaded
    # machine's slower pages still get there
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        count = log.locator(".message").count()
        most = max(most, count)
        if log.locator('.message[data-index="0"]').count():
            break
        log.evaluate("(log) => { log.scrollTop = 0; log.dispatchEvent(new Event('scroll')); }")
        page.wait_for_timeout(20)
    expect(log.locator('.message[data-index="0"]')).to_contain_text("Welcome aboard")
    assert most <= 250, most  # the page stays light: never the whole chat
    # and back down to the newest
    page.get_by_role("button", name="Jump to newest").click()
    expect(page.locator(".log .message").last).to_contain_text("Message 19999.")
    screenshot(page, "chat-long")


def test_a_search_result_link_opens_the_chat_at_the_message(page: Page, site: Site) -> None:
    chat = new_chat(site)
    add_messages(site, chat, 400, words=4)
    page.goto(f"/#/chat/{chat}/120")
    found = page.locator(".log .message.found")
    expect(found).to_have_count(1)
    expect(found).to_have_attribute("data-index", "120")
    expect(found).to_contain_text("Message 120.")
    expect(found).to_be_in_viewport()


def test_an_import_name_conflict_offers_to_replace(page: Page, site: Site) -> None:
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {"name": "Tamsin", "first_mes": "Hi."},
    }
    site.call(site.tk.library.import_bytes(json.dumps(card).encode(), source="tamsin.json"))
    card["data"]["first_mes"] = "Hello again."
    page.goto("/")
    page.get_by_label("Files to import").set_input_files(
        {"name": "tamsin.json", "mimeType": "application/json", "buffer": json.dumps(card).encode()}
    )
    conflict = page.get_by_role("alert")
    expect(conflict).to_contain_text("a character named 'Tamsin' already exists")
    expect(conflict).not_to_contain_text("--replace")
    conflict.get_by_role("button", name="Replace").click()
    expect(page.locator("#toast")).to_contain_text("Replaced Tamsin")
    stored = site.call(site.tk.store.get_record("character", "Tamsin", owner=site.tk.owner))
    assert stored.data["data"]["first_mes"] == "Hello again."


def test_copy_hide_and_delete_from_a_message_on(page: Page, site: Site) -> None:
    chat = new_chat(site)
    add_messages(site, chat, 5, words=2)  # messages 2..6: "Message 1." .. "Message 5."
    open_chat(page, chat)
    page.get_by_role("button", name="Copy message 2", exact=True).click()
    expect(page.locator("#toast")).to_have_text("Message copied")
    # each message says its tokens, as the next turn counts them
    expect(page.locator('.log .message[data-index="1"] .tokens')).to_have_text(
        re.compile(r"^\d+ tokens$")
    )
    assert page.evaluate("navigator.clipboard.readText()") == "Message 1. word word"

    # hidden from the prompt (SillyTavern's ghost), still in the chat, and back
    page.get_by_role("button", name="Hide message 3", exact=True).click()
    hidden = page.locator('.log .message[data-index="2"]')
    expect(hidden.locator(".status")).to_have_text("[hidden from the prompt]")
    assert stored_messages(site, chat)[2]["is_system"] is True
    site.upstream.script(Reply(text="Noted.", pace=0.01))
    turn(page, lambda: send(page, "Go on."))
    contents = [str(m.get("content")) for m in site.upstream.requests[-1].body["messages"]]
    assert not any("Message 2." in c for c in contents)
    assert any("Message 3." in c for c in contents)
    page.get_by_role("button", name="Unhide message 3", exact=True).click()
    expect(hidden.locator(".status")).to_have_count(0)
    assert stored_messages(site, chat)[2]["is_system"] is False

    # delete mode: pick message 4; it and every later one go, in one confirmation
    page.get_by_role("button", name="Delete messages").click()
    page.locator('.log .message[data-index="3"] .body').click()
    expect(page.locator(".log .message.doomed")).to_have_count(5)
    page.get_by_role("button", name="Delete 5 messages").click()
    expect(page.locator(".log .message")).to_have_count(3)
    assert [m["mes"] for m in stored_messages(site, chat)][-1] == "Message 2. word word"


def test_an_attached_image_goes_with_the_message(page: Page, site: Site) -> None:
    image = io.BytesIO()
    Image.new("RGB", (40, 30), "teal").save(image, format="PNG")
    chat = new_chat(site)
    open_chat(page, chat)
    page.locator(".composer input[type=file]").set_input_files(
        {"name": "boat.png", "mimeType": "image/png", "buffer": image.getvalue()}
    )
    expect(page.get_by_role("button", name="Remove image 1")).to_be_visible()
    site.upstream.script(Reply(text="A teal boat.", pace=0.01))
    turn(page, lambda: send(page, "What is this?"))
    last_user = site.upstream.requests[-1].body["messages"][-1]
    parts = last_user["content"]
    assert parts[0] == {"type": "text", "text": "What is this?"}
    assert parts[1]["type"] == "image_url"
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    # shown in the chat, the composer emptied
    expect(page.locator('.log .message[data-index="1"] img.attachment')).to_be_visible()
    expect(page.get_by_role("button", name="Remove image 1")).to_have_count(0)
    screenshot(page, "chat-attachment")


def test_slash_commands_and_quick_replies_in_the_composer(page: Page, site: Site) -> None:
    replies = QuickReplies(site.tk.store, owner=site.tk.owner)
    site.call(replies.save("Greet", "Good evening!"))
    site.call(replies.save("Tidy", "/hide 1\n/hide 2"))
    chat = new_chat(site)
    open_chat(page, chat)
    bar = page.get_by_role("toolbar", name="Quick replies")
    # a quick reply of text is sent as the user's message (with SillyTavern's trailing space)
    site.upstream.script(Reply(text="And to you.", pace=0.01))
    turn(page, bar.get_by_role("button", name="Greet").click)
    assert [m["mes"] for m in stored_messages(site, chat)][1:] == ["Good evening! ", "And to you."]
    # one of commands runs them in order
    bar.get_by_role("button", name="Tidy").click()
    expect(page.locator(".log .message.ghost")).to_have_count(2)
    assert [m["is_system"] for m in stored_messages(site, chat)] == [False, True, True]

    box = page.get_by_label("Message", exact=True)
    box.fill("/unhide 2")
    box.press("Enter")
    expect(page.locator(".log .message.ghost")).to_have_count(1)
    site.upstream.script(Reply(text="Another way.", pace=0.01))
    turn(page, lambda: (box.fill("/swipe"), box.press("Enter")))
    expect(page.locator(".swipes .counter")).to_have_text("2/2")
    box.fill("/swipe 1")
    box.press("Enter")
    expect(page.locator(".swipes .counter")).to_have_text("1/2")
    # a bad command or argument is named, and the text comes back to be fixed
    box.fill("/delete 9")
    box.press("Enter")
    expect(alert(page)).to_contain_text("/delete: no message #9; the chat has #0 to #2")
    expect(box).to_have_value("/delete 9")
    # not one of the composer's commands: an STscript, run on the server
    box.fill("/nope")
    box.press("Enter")
    expect(alert(page).last).to_contain_text(
        'SlashCommandParserError: Unknown command at position 1: "/nope"'
    )
    expect(box).to_have_value("/nope")
    box.fill("/setvar key=x 2 | /addvar key=x 3 | /sys The lamp flickers. | /getvar x")
    box.press("Enter")
    expect(page.locator(".alerts .alert.info").last).to_have_text("5Dismiss")
    expect(page.locator(".log .message").last).to_contain_text("The lamp flickers.")
    box.fill("/help")
    box.press("Enter")
    expect(page.locator(".alerts .alert.info").last).to_contain_text(
        "/regen: replace the last reply"
    )


def test_the_memory_panel_edits_the_summary_and_summarizes_now(page: Page, site: Site) -> None:
    chat = new_chat(site)
    add_messages(site, chat, 3, words=3)
    open_chat(page, chat)
    page.get_by_text("Memory", exact=True).click()
    page.get_by_label("Chat summary").fill("Ada boarded the ferry.")
    page.get_by_role("button", name="Save summary").click()
    expect(page.locator("#toast")).to_have_text("Summary saved")
    # kept on the second-to-last message (SillyTavern's summary box), which was read
    # without an "extra": the write into its default is stored
    stored = site.call(site.tk.chats.load(chat)).messages[-2].data
    assert stored["extra"]["memory"] == "Ada boarded the ferry."
    # summaries on with the chat's model, every 5 messages: saved to the user's settings
    page.get_by_label("Summarize", exact=True).select_option("With the chat's model")
    page.get_by_label("Every N messages").fill("5")
    page.get_by_role("button", name="Save memory settings").click()
    expect(page.locator("#toast")).to_have_text("Memory settings saved")
    summary = site.call(site.tk.settings()).memory.summary
    assert summary.source == "main" and summary.prompt_interval == 5
    site.upstream.script(Reply(text="They crossed the strait."))
    page.get_by_role("button", name="Summarize now").click()
    expect(page.get_by_label("Chat summary")).to_have_value("They crossed the strait.")
    screenshot(page, "chat-memory")


def test_search_finds_a_word_inside_another_chat_and_opens_it_there(page: Page, site: Site) -> None:
    here = new_chat(site)
    there = site.call(site.tk.chats.new_chat("Mira", name="Lighthouse log")).id
    add_messages(site, there, 30, words=2)
    site.call(
        site.tk.store.append_message(
            there,
            {"name": "Ada", "is_user": True, "mes": "The albatross circled the mast twice."},
            owner=site.tk.owner,
        )
    )
    add_messages(site, there, 10, words=2)
    open_chat(page, here)
    # the chat's own search finds nothing here; the character's chats' search finds it there
    page.get_by_text("Search this chat", exact=True).click()
    page.get_by_label("Search this chat", exact=True).fill("albatross")
    expect(page.get_by_role("status").filter(has_text="No message found")).to_be_visible()
    page.get_by_text("Chats", exact=True).click()
    page.get_by_label("Search these chats' messages", exact=True).fill("ALBATROSS")
    hits = page.get_by_role("list", name="Search these chats' messages: results")
    expect(hits.get_by_role("link")).to_have_count(1)
    expect(hits.locator("mark")).to_have_text("albatross")
    # the Search screen: every chat
    page.get_by_role("link", name="Search", exact=True).click()
    page.get_by_label("Search all chats", exact=True).fill("albatross mast")
    result = page.get_by_role("list", name="Search all chats: results").get_by_role("link")
    expect(result).to_have_count(1)
    expect(result).to_contain_text("Lighthouse log")
    screenshot(page, "search")
    result.click()
    found = page.locator(".log .message.found")
    expect(found).to_contain_text("The albatross circled the mast twice.")
    expect(found).to_be_in_viewport()
    assert page.url.endswith(f"#/chat/{there}/31")


def test_reasoning_in_think_tags_is_split_off_while_it_streams(page: Page, site: Site) -> None:
    settings = site.call(site.tk.settings())
    settings.reasoning.auto_parse = True  # "Parse reasoning": no template imported
    site.call(site.tk.store.put_settings(settings, owner=site.tk.owner))
    try:
        chat = new_chat(site)
        open_chat(page, chat)
        site.call(hold(site))
        pieces = [
            "<think>",
            "Check the ",
            "tide table.",
            "</think>",
            "High water ",
            "at noon.",
            " Go.",
        ]
        site.upstream.script(HangReply(text="".join(pieces), chunks=pieces, hang_after=6))
        send(page, "When do we sail?")
        live = page.locator(".log .live")
        expect(live.locator(".body")).to_have_text("High water at noon.")
        expect(live.locator("details.reasoning pre")).to_have_text("Check the tide table.")
        assert "<think>" not in live.inner_text()
        turn(page, lambda: site.call(release(site)))
        expect(last_body(page)).to_have_text("High water at noon. Go.")
        stored = stored_messages(site, chat)[-1]
        assert stored["mes"] == "High water at noon. Go."
        assert stored["extra"]["reasoning"] == "Check the tide table."
    finally:
        settings.reasoning.auto_parse = False
        site.call(site.tk.store.put_settings(settings, owner=site.tk.owner))
        site.call(hold(site))
