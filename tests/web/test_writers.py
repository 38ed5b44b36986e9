"""Writers and the utility model in Debian's Chromium against a real server and three scripted
upstreams (the chat's, a character's writer's, the utility model's): the user picks a utility
model in Settings and a connection profile in Mira's editor (Writer); Mira's reply then comes
through her own profile (its upstream sees the turn, the chat's does not; the chat's side
panel says so) while "Summarize now" goes to the utility model (its upstream sees the
summary, no other does). A writer whose profile was deleted stays shown as "(not stored)"
and her next turn is refused naming it. Screenshots at desktop and phone sizes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from playwright.sync_api import Page, expect

from chat._server import HangingServer, Reply
from tavernkit.models.profile import ConnectionProfile

from ._pages import last_body, new_chat, open_chat, send, turn
from ._site import Site
from .conftest import screenshot


@contextmanager
def _upstream(site: Site) -> Iterator[HangingServer]:
    """Another scripted upstream on loopback, run on the server's loop like the first."""
    upstream = HangingServer()
    site.call(upstream.__aenter__())
    try:
        yield upstream
    finally:
        site.call(upstream.__aexit__(None, None, None))


def _profile(site: Site, name: str, upstream: HangingServer, model: str) -> None:
    profile = ConnectionProfile(
        name=name, source="openai", base_url=upstream.base_url + "/v1", model=model
    )
    site.call(site.tk.store.put("connection_profile", profile, owner=site.tk.owner))


def _mira(site: Site) -> str:
    return site.call(site.tk.store.get_record("character", "Mira")).info.id


def test_a_character_answers_through_its_writer_while_a_summary_goes_to_the_utility_model(
    page: Page, site: Site
) -> None:
    with _upstream(site) as story, _upstream(site) as helper:
        _profile(site, "Storyteller", story, "story-1")
        _profile(site, "Helper", helper, "helper-1")

        page.goto("/#/settings")
        utility = page.get_by_label("Utility model")
        expect(utility).to_have_value("")  # "Same as chat"
        utility.select_option("Helper")
        expect(page.locator("#toast")).to_have_text("Side tasks use Helper")
        assert site.call(site.tk.settings()).selections.utility_profile == "Helper"
        page.get_by_role("region", name="Side tasks").scroll_into_view_if_needed()
        screenshot(page, "writers-settings")

        page.goto(f"/#/character/{_mira(site)}")
        writer = page.get_by_role("region", name="Writer")
        profile = writer.get_by_label("Connection profile")
        expect(profile).to_have_value("")
        expect(writer.get_by_label("Preset")).to_have_value("")
        profile.select_option("Storyteller")
        page.get_by_role("button", name="Save").click()
        expect(page.locator("#toast")).to_have_text("Saved")
        card = site.call(site.tk.store.get_record("character", "Mira")).data
        assert card["data"]["extensions"]["tavernkit"]["writer"] == {
            "profile": "Storyteller",
            "preset": None,
        }
        screenshot(page, "writers-editor")

        chats_before = len(site.upstream.requests)
        story.script(Reply(text="The tide turns tonight, Ada.", pace=0.01))
        chat = new_chat(site)
        open_chat(page, chat)
        turn(page, lambda: send(page, "What news from the harbour?"))
        expect(last_body(page)).to_have_text("The tide turns tonight, Ada.")
        assert len(story.requests) == 1 and story.requests[0].body["model"] == "story-1"
        assert "What news from the harbour?" in json.dumps(story.requests[0].body)
        assert len(site.upstream.requests) == chats_before  # the chat's model never saw it
        # the side panel says whose model writes here, beside the chat's Connection
        expect(page.locator(".writer-note")).to_have_text(
            "Mira writes with profile Storyteller. Change the writer"
        )

        page.get_by_text("Memory", exact=True).click()
        helper.script(Reply(text="Ada asked Mira for news; the tide turns."))
        page.get_by_role("button", name="Summarize now").click()
        expect(page.get_by_label("Chat summary")).to_have_value(
            "Ada asked Mira for news; the tide turns."
        )
        assert len(helper.requests) == 1 and helper.requests[0].body["model"] == "helper-1"
        assert "The tide turns tonight" in json.dumps(helper.requests[0].body)
        assert len(story.requests) == 1 and len(site.upstream.requests) == chats_before
        screenshot(page, "writers-chat")

        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(f"/#/character/{_mira(site)}")
        expect(page.get_by_role("region", name="Writer")).to_be_visible()
        page.get_by_role("region", name="Writer").scroll_into_view_if_needed()
        screenshot(page, "writers-editor-phone")
        page.goto("/#/settings")
        page.get_by_role("region", name="Side tasks").scroll_into_view_if_needed()
        screenshot(page, "writers-settings-phone")


def test_a_writer_whose_profile_was_deleted_is_shown_and_refused_by_name(
    page: Page, site: Site
) -> None:
    with _upstream(site) as story:
        _profile(site, "Bard", story, "bard-1")
        page.goto(f"/#/character/{_mira(site)}")
        page.get_by_role("region", name="Writer").get_by_label("Connection profile").select_option(
            "Bard"
        )
        page.get_by_role("button", name="Save").click()
        expect(page.locator("#toast")).to_have_text("Saved")
        site.call(site.tk.store.delete("connection_profile", "Bard", owner=site.tk.owner))
        page.reload()
        profile = page.get_by_role("region", name="Writer").get_by_label("Connection profile")
        expect(profile).to_have_value("Bard")
        expect(profile.locator("option:checked")).to_have_text("Bard (not stored)")

        chats_before = len(site.upstream.requests)
        chat = new_chat(site)
        open_chat(page, chat)
        send(page, "Sing for us.")
        alert = page.get_by_role("alert").filter(has_text="'Bard'")
        expect(alert).to_contain_text("'Mira'")
        screenshot(page, "writers-refused")
        assert story.requests == [] and len(site.upstream.requests) == chats_before

        page.goto(f"/#/character/{_mira(site)}")
        writer = page.get_by_role("region", name="Writer")
        writer.get_by_label("Connection profile").select_option("")
        page.get_by_role("button", name="Save").click()
        expect(page.locator("#toast")).to_have_text("Saved")
        card = site.call(site.tk.store.get_record("character", "Mira")).data
        assert "tavernkit" not in card["data"]["extensions"]
