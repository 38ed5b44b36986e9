"""Group chats in the browser (issue 33), as a user meets them in Chromium against a real
server: a group of three characters made on the Groups screen (members added, reordered and
one muted, the reply strategy picked), its chat started, a message answered by each member
under its own name and avatar (both streaming at once), a muted member made to reply now, a
member's reply swiped; a reload mid-turn shows each reply once, a regeneration replaces the
batch and Continue goes on with the last speaker; auto mode goes on by itself until the user
types; the group edited and deleted."""

from __future__ import annotations

import io
import time
from typing import Any

from PIL import Image
from playwright.sync_api import Page, expect

from chat._server import HangReply, Reply
from server._cards import card
from tavernkit.formats.cards import card_to_png
from tavernkit.groups.records import create_group, load_group
from tavernkit.models.character import Card
from tavernkit.models.group import ActivationStrategy

from ._pages import last_body, send, stored_messages, turn
from ._site import Site
from .conftest import screenshot

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 720}


def png_card(name: str, colour: tuple[int, int, int], greeting: str) -> bytes:
    data = card(name)
    data["data"]["first_mes"] = greeting
    data["data"]["alternate_greetings"] = []
    data["data"]["description"] = f"{{{{char}}}} is {name}, one of the crew."
    image = io.BytesIO()
    Image.new("RGB", (64, 96), colour).save(image, format="PNG")
    return card_to_png(Card.model_validate(data), image.getvalue())


def add_crew(site: Site) -> None:
    """Finn and Juno beside Mira, each a PNG card with an image of its own."""
    for name, colour, greeting in (
        ("Finn", (40, 120, 200), "Finn coils a rope. Morning, {{user}}."),
        ("Juno", (200, 90, 60), "Juno waves from the wheelhouse."),
    ):
        if name not in {c.name for c in site.call(site.tk.store.list("character"))}:
            site.call(
                site.tk.library.import_bytes(
                    png_card(name, colour, greeting), source=f"{name.lower()}.png"
                )
            )


def names(page: Page) -> list[str]:
    """The speakers of the shown messages, in order (live ones included)."""
    result: list[str] = page.locator(".log > li.message:visible .meta .name").evaluate_all(
        "(nodes) => nodes.map((n) => n.textContent)"
    )
    return result


def member_row(page: Page, name: str) -> Any:
    return page.get_by_role("list", name="Members").get_by_role("listitem").filter(has_text=name)


async def release(site: Site) -> None:
    site.upstream.release.set()


async def hold(site: Site) -> None:
    site.upstream.release.clear()


def make_group(site: Site, name: str, members: list[str], **fields: Any) -> str:
    """A stored group (list order unless told) and a new chat of it; the chat's id."""
    fields.setdefault("activation_strategy", int(ActivationStrategy.LIST))
    site.call(
        create_group(
            site.tk.store,
            name,
            members,
            owner=site.tk.owner,
            created_ms=int(time.time() * 1000),
            **fields,
        )
    )
    return site.call(site.tk.chats.new_group_chat(name)).id


def test_a_group_is_made_and_its_members_reply_each_under_their_name(
    page: Page, site: Site
) -> None:
    add_crew(site)
    page.set_viewport_size(DESKTOP)
    page.goto("/#/")
    page.get_by_role("link", name="Groups").click()
    expect(page.get_by_role("heading", name="Groups")).to_be_visible()
    page.get_by_role("button", name="New group").click()

    page.get_by_label("Group name").fill("Crew")
    for name in ("Mira", "Juno", "Finn"):
        page.get_by_label("Add member").select_option(label=name)
        page.get_by_role("button", name="Add", exact=True).click()
    expect(member_row(page, "Finn")).to_be_visible()
    # Finn goes before Juno; Juno is muted
    page.get_by_role("button", name="Move Finn up").click()
    member_row(page, "Juno").get_by_label("Mute").check()
    expect(page.get_by_role("list", name="Members").locator(".name")).to_have_text(
        ["Mira", "Finn", "Juno"]
    )
    page.get_by_label("Reply strategy").select_option(label="List order")
    screenshot(page, "group-new-desktop")
    page.get_by_role("button", name="Create group").click()
    expect(page.get_by_role("heading", name="Crew")).to_be_visible()
    stored = site.call(load_group(site.tk.store, "Crew", owner=site.tk.owner))
    assert [(m.name, m.muted) for m in stored.members] == [
        ("Mira", False),
        ("Finn", False),
        ("Juno", True),
    ]
    assert stored.group.strategy == ActivationStrategy.LIST

    # the list shows it, with its members
    page.get_by_role("link", name="‹ Groups").click()
    expect(page.get_by_role("list", name="Groups")).to_contain_text("Mira, Finn, Juno (muted)")
    screenshot(page, "groups-desktop")
    page.get_by_role("link", name="Crew").click()

    # a chat of the group opens with every member's greeting, each under its speaker
    page.get_by_role("button", name="Start new chat").click()
    expect(page.locator(".log .message")).to_have_count(3)
    assert names(page) == ["Mira", "Finn", "Juno"]
    chat = page.url.split("#/chat/")[1]

    # a message: the unmuted members reply in list order, both streaming in the log at once
    site.call(hold(site))
    site.upstream.script(
        Reply(text="All aboard for the dawn crossing.", pace=0.01),
        HangReply(text="Ropes are in. Ready.", hang_after=3),
    )
    send(page, "Hello, crew!")
    expect(page.locator(".log .live")).to_have_count(2)
    expect(page.locator(".log .live .name")).to_have_text(["Mira", "Finn"])
    expect(page.locator(".log .live").first.locator(".body")).to_have_text(
        "All aboard for the dawn crossing."
    )
    expect(page.locator(".log .live").last.locator(".typing")).to_be_visible()
    expect(page.locator(".log .live").first.locator(".typing")).to_have_count(0)
    expect(page.locator(".log .live.speaker img.avatar")).to_have_count(1)  # Finn's picture
    turn(page, lambda: site.call(release(site)))
    site.call(hold(site))
    assert names(page)[-3:] == ["Ada", "Mira", "Finn"]
    expect(last_body(page)).to_have_text("Ropes are in. Ready.")
    messages = stored_messages(site, chat)
    assert [(m["name"], m.get("original_avatar")) for m in messages[-2:]] == [
        ("Mira", "Mira.png"),
        ("Finn", "Finn.png"),
    ]
    # the stored messages show each speaker's avatar: Finn's image, Mira's initial (no image)
    finn = page.locator(".log .message").last
    expect(finn.locator("img.avatar")).to_have_attribute(
        "src", f"/characters/{stored.character_ids['Finn.png']}/thumbnail"
    )
    expect(page.locator(".log .message").nth(-2).locator(".avatar.initial")).to_have_text("M")

    # the muted Juno replies when asked to
    site.upstream.script(Reply(text="I was listening all along."))
    turn(page, page.get_by_role("button", name="Make Juno speak").click)
    assert names(page)[-1] == "Juno"
    expect(last_body(page)).to_have_text("I was listening all along.")

    # a swipe asks Juno again; the reply keeps its speaker
    site.upstream.script(Reply(text="The wheel is mine today."))
    last = page.locator(".log .message").last
    turn(page, last.get_by_role("button", name="Next swipe").click)
    assert names(page)[-1] == "Juno"
    expect(last_body(page)).to_have_text("The wheel is mine today.")
    expect(page.locator(".log .message").last.locator(".swipes .counter")).to_have_text("2/2")
    latest = stored_messages(site, chat)[-1]
    assert latest["swipes"] == [
        "I was listening all along.",
        "The wheel is mine today.",
    ]
    assert latest["name"] == "Juno" and latest["original_avatar"] == "Juno.png"
    screenshot(page, "group-chat-desktop")

    # on a phone: the chat, its tools (the group's members and chats), the editor
    page.set_viewport_size(PHONE)
    expect(page.get_by_role("button", name="Make Mira speak")).to_be_visible()
    screenshot(page, "group-chat-phone")
    page.get_by_role("button", name="Chat tools").click()
    tools = page.get_by_role("complementary", name="Chat tools")
    expect(tools.get_by_role("list", name="Members")).to_contain_text("Juno")
    expect(tools.get_by_role("list", name="Group chats").get_by_role("link")).to_have_count(1)
    screenshot(page, "group-chat-tools-phone")
    tools.get_by_role("link", name="Edit group").click()
    expect(page.get_by_label("Group name")).to_have_value("Crew")
    screenshot(page, "group-editor-phone")


def test_a_reload_mid_turn_shows_each_reply_once_regenerate_replaces_the_batch_and_continue(
    page: Page, site: Site
) -> None:
    add_crew(site)
    chat = make_group(site, "Reloaders", ["Mira", "Finn"])
    page.goto(f"/#/chat/{chat}")
    expect(page.locator(".log .message")).to_have_count(2)
    site.call(hold(site))
    site.upstream.script(
        Reply(text="Mira answers first."),
        HangReply(text="Still talking. More here", chunks=["Still talking.", " More here"]),
    )
    send(page, "Who is there?")
    expect(page.locator(".log .live").last.locator(".body")).to_have_text("Still talking.")
    page.reload()
    expect(page.locator(".log .live").last.locator(".body")).to_have_text("Still talking.")
    # Mira's stored reply and Finn's stored partial reply are not shown beside the live ones
    expect(page.locator(".log > li:visible").filter(has_text="Mira answers first.")).to_have_count(
        1
    )
    expect(page.locator(".log > li:visible").filter(has_text="Still talking.")).to_have_count(1)
    turn(page, lambda: site.call(release(site)))
    site.call(hold(site))
    assert names(page)[-3:] == ["Ada", "Mira", "Finn"]
    expect(last_body(page)).to_have_text("Still talking. More here")

    # Regenerate asks the whole batch again: the old replies go while the new ones stream
    site.upstream.script(
        Reply(text="Mira, second take."),
        HangReply(text="Second take. Done", chunks=["Second take.", " Done"]),
    )
    page.get_by_role("button", name="Regenerate", exact=True).click()
    expect(page.locator(".log .live").last.locator(".body")).to_have_text("Second take.")
    expect(page.locator(".log > li:visible").filter(has_text="Mira answers first.")).to_have_count(
        0
    )
    expect(page.locator(".log > li:visible").filter(has_text="Still talking.")).to_have_count(0)
    turn(page, lambda: site.call(release(site)))
    site.call(hold(site))
    assert names(page)[-3:] == ["Ada", "Mira", "Finn"]
    assert [m["mes"] for m in stored_messages(site, chat)[-3:]] == [
        "Who is there?",
        "Mira, second take.",
        "Second take. Done",
    ]

    # Continue goes on with the last speaker's reply, in its place
    site.upstream.script(Reply(text="And the tide turns."))
    turn(page, page.get_by_role("button", name="Continue").click)
    assert names(page)[-3:] == ["Ada", "Mira", "Finn"]
    expect(last_body(page)).to_contain_text("Second take. Done")
    expect(last_body(page)).to_contain_text("And the tide turns.")
    expect(page.locator(".log > li:visible").filter(has_text="Second take. Done")).to_have_count(1)
    assert stored_messages(site, chat)[-1]["name"] == "Finn"


def test_auto_mode_goes_on_until_the_user_types(page: Page, site: Site) -> None:
    add_crew(site)
    chat = make_group(
        site,
        "Talkers",
        ["Mira", "Finn"],
        activation_strategy=int(ActivationStrategy.MANUAL),
        auto_mode_delay=1,
    )
    page.goto(f"/#/chat/{chat}")
    expect(page.locator(".log .message")).to_have_count(2)
    site.upstream.script(Reply(text="Tick one."), Reply(text="Tick two."))
    auto = page.get_by_label("Auto mode")
    auto.check()
    # two turns come by themselves, a second apart, each one member's reply
    expect(page.locator(".log .message:not(.live)")).to_have_count(4, timeout=15_000)
    expect(page.locator(".log .live")).to_have_count(0)
    bodies = [m["mes"] for m in stored_messages(site, chat)[-2:]]
    assert bodies == ["Tick one.", "Tick two."]
    assert all(not m["is_user"] for m in stored_messages(site, chat))
    # typing switches it off: nothing more is asked for
    requests = len(site.upstream.requests)
    page.get_by_label("Message", exact=True).press_sequentially("wait")
    expect(auto).not_to_be_checked()
    page.wait_for_timeout(2500)
    assert len(site.upstream.requests) == requests


def test_a_group_is_renamed_trimmed_switched_to_joined_cards_and_deleted(
    page: Page, site: Site
) -> None:
    add_crew(site)
    make_group(site, "Editors", ["Mira", "Finn", "Juno"])
    make_group(site, "Day watch", ["Mira"])
    group = site.call(load_group(site.tk.store, "Editors", owner=site.tk.owner))
    page.goto(f"/#/group/{group.id}")
    expect(page.get_by_label("Group name")).to_have_value("Editors")
    page.get_by_label("Group name").fill("Night watch")
    member_row(page, "Mira").get_by_role("button", name="Remove").click()
    expect(member_row(page, "Mira")).to_have_count(0)
    expect(page.get_by_label("Join prefix")).to_be_hidden()
    page.get_by_label("Generation mode").select_option(label="Join character cards (include muted)")
    page.get_by_label("Join prefix").fill("[<FIELDNAME> of {{char}}]")
    page.get_by_label("Allow self responses").check()
    page.get_by_label("Auto mode delay (seconds)").fill("7")
    screenshot(page, "group-editor-desktop")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#toast")).to_have_text("Group saved")
    edited = site.call(load_group(site.tk.store, group.id, owner=site.tk.owner)).group
    assert edited.name == "Night watch"
    assert edited.members == ["Finn.png", "Juno.png"]
    assert edited.generation_mode == 2 and edited.allow_self_responses
    assert edited.generation_mode_join_prefix == "[<FIELDNAME> of {{char}}]"
    assert edited.auto_mode_delay == 7

    # a name another group has is refused, and the alert stays
    page.get_by_label("Group name").fill("Day watch")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("alert")).to_contain_text("pick another name")

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete group").click()
    expect(page.get_by_role("heading", name="Groups")).to_be_visible()
    expect(page.get_by_role("list", name="Groups")).not_to_contain_text("Night watch")
