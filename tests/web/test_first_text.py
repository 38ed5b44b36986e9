"""The live message shows a reply's first words as they arrive, before its first sentence
ends, and a failed attempt's unfinished clause, taken back when the fallback continues the
reply, shows once."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from chat._server import Reply
from tavernkit.models.profile import ConnectionProfile, FallbackChain, FallbackEntry

from ._pages import last_body, new_chat, open_chat, send, stored_messages, turn
from ._site import Site
from .conftest import screenshot


def test_the_first_words_show_before_the_first_sentence_ends(site: Site, page: Page) -> None:
    words = ["Once ", "upon ", "a ", "time ", "there ", "was ", "a ", "lighthouse."]
    # 0.6 s a word: the sentence ends ~4 s after its first word, so a loaded CI machine still
    # looks at the live message before the reply is whole
    site.upstream.script(Reply(text="".join(words), chunks=words, pace=0.6))
    chat = new_chat(site)
    open_chat(page, chat)

    def send_and_look() -> None:
        send(page, "Tell me a story.")
        live = page.locator(".log .live")
        expect(live.locator(".body")).to_contain_text("Once upon", timeout=4_000)
        # the sentence is still coming: the words were not held for its end
        assert "lighthouse" not in live.locator(".body").inner_text()
        expect(live).to_have_attribute("aria-busy", "true")
        screenshot(page, "first-words-live")

    turn(page, send_and_look)
    expect(last_body(page)).to_have_text("Once upon a time there was a lighthouse.")


async def _chained(site: Site) -> None:
    tk = site.tk
    profile: Any = await tk.store.get("connection_profile", "scripted", owner=tk.owner)
    chained = ConnectionProfile.model_validate(
        {**profile.model_dump(), "name": "chained", "fallback_chain": "backup"}
    )
    await tk.store.put("connection_profile", chained, owner=tk.owner)
    chain = FallbackChain(name="backup", entries=[FallbackEntry(profile="scripted", model="m2")])
    await tk.store.put("fallback_chain", chain, owner=tk.owner)
    settings = await tk.settings()
    settings.selections.profile = "chained"
    await tk.store.put_settings(settings, owner=tk.owner)


def test_a_withdrawn_tail_shows_once_in_the_live_message(site: Site, page: Page) -> None:
    site.call(_chained(site))
    site.upstream.script(
        Reply(text="", chunks=["The tide turns. ", "It ri", "ses."], break_after=2, pace=0.1),
        Reply(text="", chunks=[" It", " rises", " high", " tonight."], pace=0.4),
    )
    chat = new_chat(site)
    open_chat(page, chat)

    def send_and_look() -> None:
        send(page, "And the tide?")
        body = page.locator(".log .live .body")
        expect(body).to_contain_text("It rises", timeout=5_000)
        # the cut attempt's "It ri" was taken back before the continuation wrote it again
        shown = body.inner_text()
        assert shown.startswith("The tide turns. It rises") and shown.count("It ri") == 1

    turn(page, send_and_look)
    expect(last_body(page)).to_have_text("The tide turns. It rises high tonight.")
    assert stored_messages(site, chat)[-1]["mes"] == "The tide turns. It rises high tonight."
