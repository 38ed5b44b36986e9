"""The web UI in Debian's Chromium against a real server (uvicorn on loopback) and a scripted
upstream: PNG card import by drag and drop, a streamed chat, swipes and back, the reasoning
panel (toggle, copy), continue, edit, branch, a reload mid-stream that resumes, the prompt
inspector, an XSS corpus that stays inert, the phone layout and the login page."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from chat._server import HangReply, Reply
from tavernkit.chat.personas import Personas
from tavernkit.formats.cards import card_to_png
from tavernkit.models.character import Character
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.providers.local_engine import local_model_missing

from ._pages import drop_files, last_body, new_chat, open_chat, send, stored_messages, turn
from ._site import Site
from .conftest import screenshot

PASSWORD = "correct horse battery"


def test_a_png_card_dropped_on_the_grid_is_imported_and_shown(page: Page, site: Site) -> None:
    png = card_to_png(Character.create(name="Nell", first_mes="Hello from the lighthouse."))
    page.goto("/")
    expect(page.get_by_role("button", name="Chat with Mira")).to_be_visible()
    drop_files(page, ".dropzone", {"nell.png": png})
    tile = page.get_by_role("button", name="Chat with Nell")
    expect(tile).to_be_visible()
    # the thumbnail is the card's own image, served by the server
    expect(tile.locator("img")).to_have_js_property("complete", True)
    assert tile.locator("img").evaluate("(img) => img.naturalWidth") > 0
    page.get_by_label("Search characters").fill("nel")
    expect(page.get_by_role("button", name="Chat with Mira")).to_have_count(0)
    expect(tile).to_be_visible()
    page.get_by_label("Search characters").fill("")
    expect(page.get_by_role("button", name="Chat with Mira")).to_be_visible()
    screenshot(page, "characters")
    tile.click()
    expect(last_body(page)).to_have_text("Hello from the lighthouse.")


def test_streamed_reply_swipes_and_the_reasoning_panel(page: Page, site: Site) -> None:
    chat = new_chat(site)
    open_chat(page, chat)
    counter = page.locator(".swipes .counter")
    # the greetings are the first message's swipes
    expect(counter).to_have_text("1/3")
    page.get_by_role("button", name="Next swipe").click()
    expect(counter).to_have_text("2/3")
    expect(last_body(page)).to_have_text("Mind the gap, Ada.")
    page.get_by_role("button", name="Previous swipe").click()
    expect(counter).to_have_text("1/3")

    site.upstream.script(
        Reply(text="The **tide** turns at dusk.", reasoning="She checks the chart.", pace=0.05)
    )
    turn(page, lambda: send(page, "When do we sail?"))
    reply = page.locator(".log .message").last
    expect(reply.locator(".body")).to_have_text("The tide turns at dusk.")
    expect(reply.locator(".body strong")).to_have_text("tide")
    assert stored_messages(site, chat)[-1]["mes"] == "The **tide** turns at dusk."

    panel = reply.locator("details.reasoning")
    expect(panel).to_be_visible()
    expect(panel.locator("pre")).to_be_hidden()  # stored reasoning starts folded
    panel.locator("summary").click()
    expect(panel.locator("pre")).to_have_text("She checks the chart.")
    panel.get_by_role("button", name="Copy reasoning").click()
    expect(page.locator("#toast")).to_have_text("Reasoning copied")
    assert page.evaluate("navigator.clipboard.readText()") == "She checks the chart."
    screenshot(page, "chat")

    # swiping right past the last swipe generates a new one; back shows the first again
    site.upstream.script(Reply(text="High water, then we go.", pace=0.02))
    turn(page, page.get_by_role("button", name="Next swipe").click)
    expect(counter).to_have_text("2/2")
    expect(last_body(page)).to_have_text("High water, then we go.")
    page.get_by_role("button", name="Previous swipe").click()
    expect(counter).to_have_text("1/2")
    expect(last_body(page)).to_have_text("The tide turns at dusk.")


def test_continue_edit_and_branch(page: Page, site: Site) -> None:
    chat = new_chat(site)
    open_chat(page, chat)
    site.upstream.script(Reply(text="The ferry leaves", pace=0.01))
    turn(page, lambda: send(page, "Tell me."))
    expect(last_body(page)).to_have_text("The ferry leaves")

    site.upstream.script(Reply(text=" at nine sharp.", pace=0.01))
    turn(page, page.get_by_role("button", name="Continue").click)
    expect(last_body(page)).to_have_text("The ferry leaves at nine sharp.")
    assert stored_messages(site, chat)[-1]["mes"] == "The ferry leaves at nine sharp."

    page.get_by_role("button", name="Edit message 3").click()
    page.get_by_role("textbox", name="Edit message").fill("The ferry leaves at *ten*.")
    page.get_by_role("button", name="Save").click()
    expect(last_body(page).locator("em")).to_have_text("ten")
    assert stored_messages(site, chat)[-1]["mes"] == "The ferry leaves at *ten*."

    page.get_by_role("button", name="Branch at message 2").click()
    page.wait_for_url(re.compile(r"#/chat/(?!" + re.escape(chat) + r"$)"))
    expect(page.locator(".log .message")).to_have_count(2)
    expect(last_body(page)).to_have_text("Tell me.")
    assert len(stored_messages(site, chat)) == 3  # the original is untouched


def test_a_reload_mid_stream_resumes_the_reply(page: Page, site: Site) -> None:
    chat = new_chat(site)
    open_chat(page, chat)
    words = "One. Two. Three. Four."
    # the upstream stalls after two pieces, so the reload surely lands mid-reply
    pieces = [w + " " for w in words.split()]
    site.upstream.script(HangReply(text=words, chunks=pieces, hang_after=2))
    send(page, "Count for me.")
    expect(page.locator(".log .live .body")).to_have_text("One. Two.")
    page.reload()
    # the reloaded page picks the turn's stream up again: what was sent, then the rest
    expect(page.locator(".log .live .body")).to_have_text("One. Two.")
    expect(page.get_by_role("button", name="Stop")).to_be_enabled()
    turn(page, lambda: site.call(release(site)))
    assert stored_messages(site, chat)[-1]["mes"].split() == words.split()
    expect(last_body(page)).to_have_text(words)


def test_a_dropped_connection_resumes_without_repeating(page: Page, site: Site) -> None:
    chat = new_chat(site)
    open_chat(page, chat)
    words = "One. Two. Three. Four. Five."
    site.upstream.script(Reply(text=words, chunks=[w + " " for w in words.split()]))
    asked: list[dict[str, str]] = []

    def drop_the_first_stream(route: Route) -> None:
        asked.append({**route.request.all_headers(), "url": route.request.url})
        if len(asked) > 1:
            route.continue_()
            return
        # the first stream breaks after three events, as a dropped connection would
        real = route.fetch()
        frames = re.split(r"\r?\n\r?\n", real.text())
        route.fulfill(
            status=200,
            headers={"content-type": "text/event-stream", "cache-control": "no-cache"},
            body="\n\n".join(frames[:3]) + "\n\n",
        )

    page.route(re.compile(r"/turns/[^/]+/events"), drop_the_first_stream)
    turn(page, lambda: send(page, "Count."), timeout=20_000)
    assert len(asked) == 2  # the stream broke once and was opened again
    # what streamed in the page: each piece once, though the first stream broke after three
    assert page.locator(".log").get_attribute("data-streamed") == words + " "
    expect(last_body(page)).to_have_text(words)
    assert stored_messages(site, chat)[-1]["mes"].split() == words.split()


async def release(site: Site) -> None:
    site.upstream.release.set()


def test_stop_keeps_what_was_shown_and_delete_removes_a_message(page: Page, site: Site) -> None:
    chat = new_chat(site)
    open_chat(page, chat)
    site.call(hold(site))
    site.upstream.script(HangReply(text="Wait. the rest never comes", hang_after=1))
    send(page, "Go on.")
    expect(page.locator(".log .live .body")).to_have_text("Wait.")
    # Escape in the composer stops the turn (the Stop button does the same)
    turn(page, lambda: page.get_by_label("Message", exact=True).press("Escape"))
    expect(last_body(page)).to_have_text("Wait.")
    assert stored_messages(site, chat)[-1]["mes"].strip() == "Wait."
    site.call(release(site))

    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Delete message 3").click()
    expect(page.locator(".log .message")).to_have_count(2)
    assert [m["mes"] for m in stored_messages(site, chat)] == ["Welcome aboard, Ada.", "Go on."]


async def hold(site: Site) -> None:
    site.upstream.release.clear()


XSS = [
    "<script>window.__xss = 'script'</script>",
    "<img src=x onerror=\"window.__xss='img'\">",
    "<svg onload=\"window.__xss='svg'\"></svg>",
    "[click](javascript:window.__xss='link')",
    "[click](JaVaScRiPt:window.__xss='case')",
    "[click](java\tscript:window.__xss='tab')",
    "[click](  javascript:window.__xss='space')",
    "![pic](javascript:window.__xss='image')",
    "[data](data:text/html,<script>window.__xss='data'</script>)",
    "[vb](vbscript:msgbox)",
    '<a href="javascript:window.__xss=1">a</a>',
    "<iframe src=\"javascript:window.__xss='frame'\"></iframe>",
    "**<b onmouseover=\"window.__xss='bold'\">x</b>**",
    "`<img src=x onerror=window.__xss='code'>`",
    "```\n<script>window.__xss='fence'</script>\n```",
    "> <details open ontoggle=\"window.__xss='quote'\">",
    "&lt;script&gt;window.__xss='entity'&lt;/script&gt;",
    "\"<style>@import 'javascript:alert(1)'</style>\"",
]


def test_a_fallback_shows_its_notice(page: Page, site: Site) -> None:
    profiles = site.tk.profiles
    if not site.call(profiles.fallbacks("scripted")):
        site.call(profiles.add_fallback("scripted", "scripted", model="m-backup"))
    chat = new_chat(site)
    open_chat(page, chat)
    site.upstream.script(
        Reply(status=401, error={"message": "no such key"}), Reply(text="Backup reply.")
    )
    turn(page, lambda: send(page, "Anyone there?"))
    expect(last_body(page)).to_have_text("Backup reply.")
    # the stored notice is shown with the reply (of the swipe that carries it)
    notice = page.locator(".log .message").last.locator(".notice")
    expect(notice).to_contain_text("Answered by fallback model m-backup")
    expect(notice).to_contain_text("m1: auth (401)")
    site.call(profiles.remove_fallback("scripted", "scripted", model="m-backup"))


def test_impersonate_authors_note_and_the_chat_list(page: Page, site: Site) -> None:
    chat = new_chat(site)
    open_chat(page, chat)
    site.upstream.script(Reply(text="I step aboard.", pace=0.01))
    turn(page, page.get_by_role("button", name="Impersonate").click)
    # an impersonation lands in the composer, not in the chat
    expect(page.get_by_label("Message", exact=True)).to_have_value("I step aboard.")
    assert len(stored_messages(site, chat)) == 1

    page.get_by_text("Author's note").click()
    page.get_by_label("Author's note", exact=True).fill("Keep it foggy.")
    page.get_by_label("Author's note depth").fill("1")
    page.get_by_role("button", name="Save note").click()
    expect(page.locator("#toast")).to_have_text("Author's note saved")
    meta = site.call(site.tk.chats.load(chat)).header["chat_metadata"]
    assert meta["note_prompt"] == "Keep it foggy." and meta["note_depth"] == 1

    other = site.call(site.tk.chats.new_chat("Mira", name="Night crossing")).id
    page.reload()
    page.get_by_text("Chats", exact=True).click()
    page.get_by_label("Search chats").fill("night")
    chats = page.get_by_role("list", name="Chats").get_by_role("link")
    expect(chats).to_have_count(1)
    chats.first.click()
    page.wait_for_url(re.compile(re.escape(other) + "$"))


def test_the_persona_switcher_speaks_as_the_chosen_persona(page: Page, site: Site) -> None:
    personas = Personas(site.tk.store, owner=site.tk.owner)
    site.call(personas.create("Bram", "{{user}} is a retired harbour pilot."))
    chat = new_chat(site)
    open_chat(page, chat)
    page.get_by_label("Persona").select_option("Bram")
    site.upstream.script(Reply(text="Welcome, pilot.", pace=0.01))
    turn(page, lambda: send(page, "Evening."))
    sent = json.dumps(site.upstream.requests[-1].body)
    assert "Bram is a retired harbour pilot." in sent
    assert stored_messages(site, chat)[-2]["name"] == "Bram"  # the message speaks as Bram
    # the choice is the browser's: it holds after a reload, and "Default persona" ends it
    page.reload()
    expect(page.get_by_label("Persona")).to_have_value("Bram")
    page.get_by_label("Persona").select_option("")
    site.upstream.script(Reply(text="Hello again.", pace=0.01))
    turn(page, lambda: send(page, "Hi."))
    assert "retired harbour pilot" not in json.dumps(site.upstream.requests[-1].body)
    assert stored_messages(site, chat)[-2]["name"] != "Bram"
    screenshot(page, "persona-switcher")


def test_an_xss_corpus_stays_inert(page: Page, site: Site) -> None:
    chat = new_chat(site)
    for text in XSS:
        site.call(
            site.tk.store.append_message(
                chat, {"name": "Mira", "is_user": False, "mes": text}, owner=site.tk.owner
            )
        )
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    site.upstream.script(Reply(text=XSS[1] + " and " + XSS[3], pace=0.01))
    open_chat(page, chat)
    turn(page, lambda: send(page, XSS[0]))
    log = page.locator(".log")
    expect(log.locator(".message")).to_have_count(len(XSS) + 3)
    found = log.evaluate(
        """(log) => ({
            tags: [...log.querySelectorAll("script, img, svg, iframe, style, b, object, embed")]
                .filter((n) => !n.matches("img.avatar"))
                .map((n) => n.tagName),
            // the only images: the speakers' pictures, from this server
            avatars: [...log.querySelectorAll("img.avatar")].map((n) => new URL(n.src).pathname),
            handlers: [...log.querySelectorAll("*")].flatMap((n) =>
                [...n.attributes].filter((a) => /^on/i.test(a.name)).map((a) => a.name)),
            hrefs: [...log.querySelectorAll("a")].map((a) => a.href),
        })"""
    )
    assert found["tags"] == []
    assert all(re.fullmatch(r"/characters/[0-9a-f]+/thumbnail", a) for a in found["avatars"])
    assert found["handlers"] == []
    assert all(h.startswith(("http:", "https:", "mailto:")) for h in found["hrefs"])
    for link in log.locator("a").all():
        link.click(modifiers=["Shift"])  # nothing a link points at may run here
    assert page.evaluate("window.__xss") is None
    assert dialogs == []
    # the markup is shown as the text it is
    expect(log.locator(".message").nth(1).locator(".body")).to_have_text(XSS[0])


def test_a_lorebook_edit_shows_in_the_tester_and_the_inspector(page: Page, site: Site) -> None:
    entry = {
        "uid": 0,
        "key": ["harbour"],
        "content": "The lighthouse is haunted.",
        "comment": "Haunted lighthouse",
        "order": 100,
        "position": 0,
    }
    site.call(
        site.tk.library.import_bytes(
            json.dumps({"entries": {"0": entry}}).encode(), source="coast.json"
        )
    )
    settings = site.call(site.tk.settings())
    settings.world_info.global_books = ["coast"]
    site.call(site.tk.store.put_settings(settings, owner=site.tk.owner))
    chat = new_chat(site)
    site.call(
        site.tk.store.append_message(
            chat,
            {"name": "Ada", "is_user": True, "mes": "Is the lighthouse lit?"},
            owner=site.tk.owner,
        )
    )
    page.goto("/#/lorebooks")
    page.get_by_role("link", name="coast").click()
    page.get_by_text("Haunted lighthouse").click()
    page.get_by_label("Keys", exact=True).fill("lighthouse, beacon")
    page.get_by_label("Depth", exact=True).fill("2")
    page.get_by_role("button", name="Save lorebook").click()
    expect(page.locator("#toast")).to_have_text("Lorebook saved")
    stored = site.call(site.tk.store.get_record("lorebook", "coast", owner=site.tk.owner))
    saved = next(iter(stored.data["entries"].values()))
    assert saved["key"] == ["lighthouse", "beacon"] and saved["depth"] == 2
    assert saved["content"] == "The lighthouse is haunted."  # untouched fields kept

    page.get_by_label("Text to test").fill("A beacon on the cliff.")
    page.get_by_role("button", name="Test this text").click()
    row = page.locator(".lore-test tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator("td").nth(1)).to_have_text("yes")
    expect(row.locator("td").nth(2)).to_contain_text("beacon")
    screenshot(page, "lorebook")

    page.goto(f"/#/inspect/{chat}")
    expect(page.locator(".lore li")).to_contain_text("Haunted lighthouse")
    expect(page.locator(".lore li")).to_contain_text("lighthouse")
    expect(page.locator(".blocks")).to_contain_text("The lighthouse is haunted.")
    expect(page.locator(".summary")).to_contain_text("tokens")
    screenshot(page, "inspector")


def test_the_phone_layout_keeps_the_chat_usable(browser: Browser, site: Site) -> None:
    context = browser.new_context(
        base_url=site.url, viewport={"width": 390, "height": 844}, is_mobile=True
    )
    try:
        page = context.new_page()
        chat = new_chat(site)
        open_chat(page, chat)
        assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth")
        composer = page.get_by_label("Message", exact=True)
        expect(composer).to_be_visible()
        # keyboard only: the composer has focus, Enter sends
        site.upstream.script(Reply(text="Aye.", pace=0.01))
        page.keyboard.type("Ready?")
        turn(page, lambda: page.keyboard.press("Enter"))
        expect(last_body(page)).to_have_text("Aye.")
        screenshot(page, "chat-phone")
        # light / dark: the switch flips the theme and a reload keeps it
        theme = page.evaluate("document.documentElement.dataset.theme")
        page.get_by_role("button", name="Menu", exact=True).click()  # on a phone it is in the menu
        page.get_by_role("button", name="Dark/light").click()
        flipped = "light" if theme == "dark" else "dark"
        expect(page.locator("html")).to_have_attribute("data-theme", flipped)
        page.reload()
        expect(page.locator("html")).to_have_attribute("data-theme", flipped)
        expect(page.locator(".log .message").first).to_be_visible()
        screenshot(page, f"chat-phone-{flipped}")
    finally:
        context.close()


def test_the_login_page_signs_in_and_changes_carry_the_csrf_token(
    browser: Browser, tmp_path: Path
) -> None:
    with Site(tmp_path / "home", accounts=True) as accounts_site:
        state = accounts_site.server.state
        accounts_site.call(state.accounts.create_user("ann", PASSWORD))
        context = browser.new_context(base_url=accounts_site.url)
        try:
            page = context.new_page()
            page.goto("/")
            page.wait_for_url(re.compile("#/login$"))
            screenshot(page, "login")
            page.get_by_label("Name").fill("ann")
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Sign in").click()
            expect(page.get_by_role("heading", name="Characters")).to_be_visible()
            # a change through the cookie session (an import) is accepted: it carries the CSRF token
            png = card_to_png(Character.create(name="Ann's own"))
            drop_files(page, ".dropzone", {"own.png": png})
            expect(page.get_by_role("button", name="Chat with Ann's own")).to_be_visible()
        finally:
            context.close()


def test_settings_profiles_keep_keys_write_only_and_test_the_connection(
    page: Page, site: Site
) -> None:
    secret = "sk-test-VERYSECRET-0123456789"
    page.goto("/#/settings")
    page.get_by_label("Profile name").fill("upstream")
    page.get_by_label("Base URL").fill(site.upstream.base_url + "/v1")
    page.get_by_label("Model", exact=True).fill("m2")
    page.get_by_label("API key").fill(secret)
    page.get_by_role("button", name="Add profile").click()
    row = page.locator('tr[data-profile="upstream"]')
    expect(row).to_be_visible()
    expect(page.get_by_label("API key")).to_have_value("")
    assert secret not in page.content()

    site.upstream.script(Reply(text="OK"))
    row.get_by_role("button", name="Test upstream").click()
    expect(row.locator(".check")).to_have_text("OK: OK")
    assert site.upstream.requests[-1].headers["authorization"] == f"Bearer {secret}"
    site.upstream.script(Reply(status=401, error={"message": "bad key " + secret}))
    row.get_by_role("button", name="Test upstream").click()
    expect(row.locator(".check")).to_contain_text("failed (auth")
    assert secret not in page.content()

    page.get_by_label("Variable name").fill("tide")
    page.get_by_label("Variable value").fill("3")
    page.get_by_role("button", name="Set", exact=True).click()
    expect(page.get_by_role("button", name="Delete variable tide")).to_be_visible()
    assert site.call(site.tk.store.get_global_variables(owner=site.tk.owner))["tide"] == 3
    screenshot(page, "settings")


def test_generation_settings_are_saved_and_a_bad_value_is_named(page: Page, site: Site) -> None:
    before = site.call(site.tk.settings())
    book = Lorebook()
    book.new_entry(keys=["tide"], content="The tide turns at noon.")
    site.call(site.tk.store.put("lorebook", book, name="Tides", owner=site.tk.owner))
    page.goto("/#/settings")
    page.get_by_label("Scan depth (messages)").fill("4")
    page.get_by_label("Recursive scan").uncheck()
    page.get_by_label("Parse reasoning from the reply").check()
    page.get_by_label("Global lorebook Tides").check()
    page.get_by_label("Compatibility").select_option("st-1.18")
    page.get_by_role("button", name="Save settings").click()
    expect(page.locator("#toast")).to_have_text("Settings saved")
    stored = site.call(site.tk.settings())
    assert stored.world_info.depth == 4 and not stored.world_info.recursive
    assert stored.world_info.global_books == [*before.world_info.global_books, "Tides"]
    assert stored.reasoning.auto_parse
    assert stored.compat == "st-1.18" and stored.world_info.budget == before.world_info.budget
    # the form shows what is stored after a reload
    page.reload()
    expect(page.get_by_label("Scan depth (messages)")).to_have_value("4")
    expect(page.get_by_label("Global lorebook Tides")).to_be_checked()
    screenshot(page, "settings-generation")
    # an out-of-range value is refused by name, and nothing is stored
    page.get_by_label("Budget (% of context)").fill("0")
    page.get_by_label("Scan depth (messages)").fill("6")
    page.get_by_role("button", name="Save settings").click()
    expect(page.locator("#toast")).to_contain_text("world_info.budget")
    assert site.call(site.tk.settings()) == stored
    site.call(site.tk.store.put_settings(before, owner=site.tk.owner))  # the module's site


def test_a_text_completion_preset_is_made_and_its_samplers_edited(page: Page, site: Site) -> None:
    page.goto("/#/presets")
    page.get_by_label("New text preset name").fill("Creative")
    page.get_by_role("button", name="New text preset").click()
    expect(page.get_by_role("heading", name="Creative")).to_be_visible()
    # a new preset shows SillyTavern's defaults for what it leaves out
    expect(page.get_by_label("Temperature", exact=True)).to_have_value("1")
    expect(page.get_by_label("Min P")).to_have_value("0.01")
    page.get_by_label("Temperature", exact=True).fill("0.7")
    page.get_by_label("Repetition penalty", exact=True).fill("1.15")
    page.get_by_label("Dynamic temperature", exact=True).check()
    page.get_by_role("button", name="Save preset").click()
    expect(page.locator("#toast")).to_have_text("Preset saved")
    stored = site.call(site.tk.store.get("textgen_preset", "Creative", owner=site.tk.owner))
    assert stored.temp == 0.7 and stored.rep_pen == 1.15 and stored.dynatemp is True
    assert stored.min_p == 0.01  # untouched keys keep the defaults
    page.reload()
    expect(page.get_by_label("Temperature", exact=True)).to_have_value("0.7")
    expect(page.get_by_label("Dynamic temperature", exact=True)).to_be_checked()
    screenshot(page, "textgen-preset")
    page.get_by_role("link", name="All presets").click()
    expect(
        page.get_by_role("list", name="Text-completion presets").get_by_role(
            "link", name="Creative"
        )
    ).to_be_visible()


def test_the_prompt_manager_reorders_toggles_and_edits_what_the_inspector_shows(
    page: Page, site: Site
) -> None:
    preset = {"name": "Mine", **ChatCompletionPreset().model_dump(mode="json")}
    site.call(site.tk.store.put("chat_preset", preset, owner=site.tk.owner))
    settings = site.call(site.tk.settings())
    settings.selections.chat_preset = "Mine"
    site.call(site.tk.store.put_settings(settings, owner=site.tk.owner))
    chat = new_chat(site)

    page.goto("/#/presets")
    page.get_by_role("link", name="Mine").click()
    page.get_by_label("Enable Char Personality").uncheck()
    page.get_by_role("button", name="Move Scenario up").click()
    page.get_by_role("button", name="Move Scenario up").click()
    main = page.locator('[data-identifier="main"]')
    main.get_by_text("Edit").click()
    main.get_by_label("Content of Main Prompt").fill("Write tersely as {{char}}.")
    page.get_by_label("Temperature").fill("0.7")
    page.get_by_role("button", name="Save preset").click()
    expect(page.locator("#toast")).to_have_text("Preset saved")
    screenshot(page, "preset")

    page.goto(f"/#/inspect/{chat}")
    expect(page.locator(".blocks tbody tr").first).to_contain_text("Write tersely as Mira.")
    names = page.locator(".blocks tbody tr td:first-child").all_inner_texts()
    assert "charPersonality" not in names
    assert names.index("scenario") < names.index("charDescription")
    assert '"temperature": 0.7' in (page.locator(".inspection details pre").text_content() or "")


@pytest.mark.skipif(local_model_missing() is not None, reason=str(local_model_missing()))
def test_a_fresh_home_chats_with_the_demo_character_on_the_embedded_model(
    browser: Browser, tmp_path: Path
) -> None:
    with Site(tmp_path / "home", scripted=False) as local:
        context = browser.new_context(base_url=local.url)
        try:
            page = context.new_page()
            page.goto("/")
            # a fresh home: the grid offers the demo character
            page.get_by_role("button", name="add the demo character (Wren)").click()
            page.get_by_role("button", name="Chat with Wren").click()
            expect(page.locator(".log .message")).to_have_count(1)
            turn(page, lambda: send(page, "Hello! Who are you?"), timeout=120_000)
            chat = local.call(local.tk.store.list_chats(owner=local.tk.owner))[0].id
            messages = stored_messages(local, chat)
            assert len(messages) == 3 and messages[-1]["mes"].strip()
            expect(page.locator(".log .message")).to_have_count(3)
            assert last_body(page).inner_text().strip()
        finally:
            context.close()
