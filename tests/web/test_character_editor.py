"""The character editor and the grid's organisation in Debian's Chromium against a real server
and the scripted upstream: a character made in the editor (a greeting, a tag), chatted with
(its greeting shown, its description in the model's request), edited (the edit in the next
request), given an avatar (cropped to 2:3, shown in the grid), duplicated, renamed, a taken
name refused by name, exported as a PNG card and deleted; the character's chats (rename,
export, import, delete, open); favourites, tag chips and sorting in the grid; the editor at
phone size."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from PIL import Image
from playwright.sync_api import Page, expect

from chat._server import Reply
from tavernkit.errors import NotFound
from tavernkit.formats.cards import read_card
from tavernkit.models.character import Character

from ._pages import last_body, send, turn
from ._site import Site
from .conftest import screenshot


def _errors(page: Page) -> list[str]:
    """The page's uncaught errors, collected as they happen."""
    found: list[str] = []
    page.on("pageerror", lambda error: found.append(str(error)))
    return found


def _card(site: Site, ref: str) -> dict[str, Any]:
    return dict(site.call(site.tk.store.get_record("character", ref)).data)


def _request_text(site: Site) -> str:
    return json.dumps(site.upstream.requests[-1].body)


def _picture(size: tuple[int, int]) -> bytes:
    out = io.BytesIO()
    image = Image.new("RGB", size, "navy")
    image.paste(Image.new("RGB", (size[0] // 3, size[1]), "gold"), (size[0] // 3, 0))
    image.save(out, format="JPEG")
    return out.getvalue()


def _save(page: Page) -> None:
    page.get_by_role("button", name="Save", exact=True).click()


def test_make_chat_edit_avatar_duplicate_rename_export_delete(
    page: Page, site: Site, tmp_path: Path
) -> None:
    errors = _errors(page)
    page.goto("/")
    page.get_by_role("button", name="New character").click()
    expect(page.get_by_role("heading", name="New character")).to_be_visible()
    page.get_by_label("Name", exact=True).fill("Orla")
    page.get_by_label("Description", exact=True).fill("{{char}} mends nets on the quay.")
    page.get_by_label("First message").fill("Morning, {{user}}. Hand me that twine.")
    page.get_by_role("button", name="Add greeting").click()
    page.get_by_label("Greeting 1", exact=True).fill("Storm's coming, {{user}}.")
    page.get_by_role("button", name="Add greeting").click()
    page.get_by_label("Greeting 2", exact=True).fill("Mind the hooks.")
    # the second greeting goes first
    page.get_by_role("button", name="Move greeting 2 up").click()
    page.get_by_label("Tags (comma separated)").fill("sea, craft")
    page.get_by_label("Note text").fill("Orla speaks in short sentences.")
    page.get_by_label("Depth", exact=True).fill("2")
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "character-new")
    _save(page)
    page.wait_for_url(re.compile(r"#/character/(?!new)[^/]+$"))
    expect(page.get_by_role("heading", name="Orla")).to_be_visible()
    data = _card(site, "Orla")["data"]
    assert data["description"] == "{{char}} mends nets on the quay."
    assert data["alternate_greetings"] == ["Mind the hooks.", "Storm's coming, {{user}}."]
    assert data["tags"] == ["sea", "craft"]
    assert data["extensions"]["depth_prompt"] == {
        "prompt": "Orla speaks in short sentences.",
        "depth": 2,
        "role": "system",
    }
    editor_url = page.url

    # chat with her: the greeting shows, and the model is sent her description
    page.get_by_role("button", name="Chat", exact=True).click()
    expect(last_body(page)).to_have_text("Morning, Ada. Hand me that twine.")
    expect(page.locator(".swipes .counter")).to_have_text("1/3")
    site.upstream.script(Reply(text="Aye.", pace=0.01))
    turn(page, lambda: send(page, "Need a hand?"))
    assert "Orla mends nets on the quay." in _request_text(site)
    assert "Orla speaks in short sentences." in _request_text(site)
    chat_url = page.url

    # an edit reaches the next request (Chat saves the edit first)
    page.goto(editor_url)
    page.get_by_label("Description", exact=True).fill("{{char}} mends sails now.")
    page.get_by_role("button", name="Chat", exact=True).click()
    page.wait_for_url(chat_url)
    expect(page.locator(".log .message").first).to_be_visible()
    site.upstream.script(Reply(text="Canvas, this time.", pace=0.01))
    turn(page, lambda: send(page, "What are you mending?"))
    assert "Orla mends sails now." in _request_text(site)
    assert "mends nets" not in _request_text(site)

    # an avatar: a wide JPEG, cropped to 2:3 in the browser, shown in the grid
    page.goto(editor_url)
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Change avatar").click()
    chooser.value.set_files(
        files=[{"name": "orla.jpg", "mimeType": "image/jpeg", "buffer": _picture((900, 600))}]
    )
    expect(page.get_by_role("img", name="Cropped avatar preview")).to_be_visible()
    page.get_by_label("Zoom").fill("1.5")
    screenshot(page, "character-avatar-crop")
    page.get_by_role("button", name="Use this avatar").click()
    expect(page.locator("#toast")).to_have_text("Avatar saved")
    avatar = site.call(site.tk.store.get_blob("character", "Orla", "avatar"))
    assert avatar is not None
    width, height = Image.open(io.BytesIO(avatar)).size
    assert abs(width * 3 - height * 2) <= 3, (width, height)
    shown = page.get_by_role("img", name="Avatar of Orla")
    expect(shown).to_have_js_property("complete", True)
    assert shown.evaluate("(img) => img.naturalWidth") == width
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "character-editor")
    page.goto("/")
    tile = page.get_by_role("button", name="Chat with Orla")
    expect(tile.locator("img")).to_have_js_property("complete", True)
    assert tile.locator("img").evaluate("(img) => img.naturalWidth") > 0

    # duplicate (from the grid's Edit), then rename the copy
    page.get_by_role("link", name="Edit Orla").click()
    page.wait_for_url(editor_url)
    page.get_by_role("button", name="Duplicate").click()
    expect(page.get_by_role("heading", name="Orla (copy)")).to_be_visible()
    assert page.url != editor_url
    copy = _card(site, "Orla (copy)")["data"]
    assert copy["alternate_greetings"] == data["alternate_greetings"]
    assert site.call(site.tk.store.get_blob("character", "Orla (copy)", "avatar")) == avatar

    # a taken name is refused by name and the form keeps what was typed
    name = page.get_by_label("Name", exact=True)
    name.fill("Orla")
    _save(page)
    expect(page.get_by_role("alert").first).to_contain_text("Name")
    expect(name).to_have_attribute("aria-invalid", "true")
    expect(name).to_have_value("Orla")
    # a bad value is named before anything is sent
    page.get_by_label("Talkativeness").fill("2")
    name.fill("Orla Two")
    _save(page)
    expect(page.get_by_role("alert").last).to_contain_text("Talkativeness")
    expect(page.get_by_label("Talkativeness")).to_have_value("2")
    page.get_by_label("Talkativeness").fill("0.8")
    _save(page)
    expect(page.get_by_role("heading", name="Orla Two")).to_be_visible()
    renamed = _card(site, "Orla Two")["data"]
    assert renamed["name"] == "Orla Two" and renamed["extensions"]["talkativeness"] == 0.8
    assert _card(site, "Orla")["data"]["name"] == "Orla"  # the original is untouched

    # export as a PNG card
    page.get_by_label("Export as").select_option(label="PNG card")
    with page.expect_download() as download:
        page.get_by_role("button", name="Export", exact=True).click()
    assert download.value.suggested_filename == "Orla Two.png"
    saved = tmp_path / "export.png"
    download.value.save_as(saved)
    exported = read_card(saved.read_bytes(), source="export.png")
    assert exported.character.name == "Orla Two"
    assert exported.character.alternate_greetings == data["alternate_greetings"]

    # delete, after a confirmation
    page.get_by_role("button", name="Delete", exact=True).click()
    dialog = page.get_by_role("dialog", name="Delete Orla Two?")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    page.get_by_role("button", name="Delete", exact=True).click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    page.wait_for_url(re.compile(r"#/$"))
    expect(page.get_by_role("button", name="Chat with Orla", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Chat with Orla Two")).to_have_count(0)
    try:
        site.call(site.tk.store.get_record("character", "Orla Two"))
    except NotFound:
        pass
    else:
        raise AssertionError("Orla Two is still stored")
    assert errors == []


def test_a_characters_chats_from_the_editor(page: Page, site: Site, tmp_path: Path) -> None:
    errors = _errors(page)
    site.call(
        site.tk.store.put(
            "character", {"data": Character.create(name="Pell", first_mes="Ahoy.").to_wire()}
        )
    )
    first = site.call(site.tk.chats.new_chat("Pell"))
    book = {
        "name": "Pell's Harbour",
        "entries": {
            "0": {"uid": 0, "key": ["lantern"], "content": "The lantern burns blue.", "position": 0}
        },
    }
    site.call(site.tk.store.put("lorebook", book))
    page.goto("/#/character/Pell")
    # link a stored lorebook: its entries reach the prompt of Pell's chats
    page.get_by_label("Linked lorebook").select_option(label="Pell's Harbour")
    _save(page)
    expect(page.locator("#toast")).to_have_text("Saved")
    expect(page.get_by_role("link", name="Open lorebook")).to_be_visible()
    linked = site.call(site.tk.store.links("character", "Pell", "lorebook"))
    assert [b.name for b in linked] == ["Pell's Harbour"]
    assert _card(site, "Pell")["data"]["extensions"]["world"] == "Pell's Harbour"
    chats = page.get_by_role("list", name="Chats with Pell")
    expect(chats.get_by_role("listitem")).to_have_count(1)
    row = chats.get_by_role("listitem").first
    row.get_by_role("button", name=re.compile("^Rename")).click()
    page.get_by_label(re.compile("^New name for")).fill("Harbour talk")
    page.get_by_role("button", name="Save name").click()
    expect(chats.get_by_role("link", name="Harbour talk")).to_be_visible()
    assert site.call(site.tk.store.get_chat_info(first.id)).name == "Harbour talk"

    with page.expect_download() as download:
        chats.get_by_role("button", name="Export Harbour talk").click()
    assert download.value.suggested_filename == "Harbour talk.jsonl"
    saved = tmp_path / "harbour.jsonl"
    download.value.save_as(saved)
    lines = saved.read_text().splitlines()
    assert json.loads(lines[1])["mes"] == "Ahoy."

    # a chat file imported for this character, under a new name
    imported = tmp_path / "Second crossing.jsonl"
    header = json.loads(lines[0])
    message = json.loads(lines[1]) | {"mes": "Ahoy again."}
    imported.write_text("\n".join(json.dumps(x) for x in (header, message)))
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Import chat (.jsonl)").click()
    chooser.value.set_files(str(imported))
    expect(chats.get_by_role("listitem")).to_have_count(2)
    names = {c.name for c in site.call(site.tk.store.list_chats(character="Pell"))}
    assert "Harbour talk" in names and len(names) == 2

    chats.get_by_role("button", name="Delete Harbour talk").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(chats.get_by_role("listitem")).to_have_count(1)
    expect(chats.get_by_role("link", name="Harbour talk")).to_have_count(0)
    chats.get_by_role("link").first.click()
    expect(last_body(page)).to_have_text("Ahoy again.")
    site.upstream.script(Reply(text="Blue as ever.", pace=0.01))
    turn(page, lambda: send(page, "Is the lantern lit?"))
    assert "The lantern burns blue." in _request_text(site)
    assert errors == []


def test_favourites_tag_chips_and_sorting(page: Page, site: Site) -> None:
    errors = _errors(page)
    for name, tags in (("Ash", ["forest", "night"]), ("Bryn", ["coast"]), ("Cole", ["forest"])):
        card = Character.create(name=name, tags=tags, first_mes="Hi.")
        site.call(site.tk.store.put("character", {"data": card.to_wire()}))
    page.goto("/")
    grid = page.get_by_role("list", name="Characters")
    star = page.get_by_role("button", name="Favourite Cole")
    expect(star).to_have_attribute("aria-pressed", "false")
    star.click()
    expect(star).to_have_attribute("aria-pressed", "true")
    assert _card(site, "Cole")["data"]["extensions"]["fav"] is True

    page.get_by_label("Sort").select_option(label="Favourites first")
    expect(grid.get_by_role("button", name=re.compile("^Chat with")).first).to_have_accessible_name(
        "Chat with Cole"
    )
    page.get_by_label("Favourites only").check()
    expect(grid.get_by_role("button", name=re.compile("^Chat with"))).to_have_count(1)
    page.get_by_label("Favourites only").uncheck()

    chips = page.get_by_role("group", name="Filter by tag")
    forest = chips.get_by_role("button", name="forest")
    forest.click()
    expect(forest).to_have_attribute("aria-pressed", "true")
    tiles = grid.get_by_role("button", name=re.compile("^Chat with"))
    expect(tiles).to_have_count(2)
    page.get_by_label("Sort").select_option(label="Name (Z to A)")
    names = grid.locator(".tile .name")
    expect(names).to_have_text(["Cole", "Ash"])
    chips.get_by_role("button", name="night").click()
    expect(names).to_have_text(["Ash"])
    screenshot(page, "characters-filtered")
    chips.get_by_role("button", name="night").click()
    forest.click()
    expect(forest).to_have_attribute("aria-pressed", "false")
    expect(grid.get_by_role("button", name="Chat with Bryn")).to_be_visible()
    # the order is remembered
    page.reload()
    expect(page.get_by_label("Sort")).to_have_value("name_desc")
    # unstar
    page.get_by_role("button", name="Favourite Cole").click()
    expect(page.get_by_role("button", name="Favourite Cole")).to_have_attribute(
        "aria-pressed", "false"
    )
    assert _card(site, "Cole")["data"]["extensions"]["fav"] is False
    assert errors == []


def test_the_editor_at_phone_size(browser: Any, site: Site) -> None:
    context = browser.new_context(base_url=site.url, viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.set_default_timeout(10_000)
    try:
        errors = _errors(page)
        # a card naming a lorebook that is not stored (as SillyTavern's extensions.world)
        mira = _card(site, "Mira")
        mira["data"]["extensions"]["world"] = "Old Atlas"
        mira["data"]["extensions"]["x_other_tool"] = {"kept": [1, 2]}
        site.call(
            site.tk.store.put(
                "character",
                mira,
                id=site.call(site.tk.store.get_record("character", "Mira")).info.id,
            )
        )
        page.goto("/#/character/Mira")
        expect(page.get_by_role("heading", name="Mira")).to_be_visible()
        expect(page.get_by_label("Greeting 2", exact=True)).to_have_value("Tickets, please.")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, width
        for label in ("Name", "Description", "First message", "Talkativeness"):
            box = page.get_by_label(label, exact=True).bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, label
        screenshot(page, "character-editor-phone")
        # on a phone the theme switch is in the header's menu
        page.get_by_role("button", name="Menu", exact=True).click()
        page.get_by_role("button", name="Dark/light").click()
        page.keyboard.press("Escape")
        screenshot(page, "character-editor-phone-dark")
        page.get_by_role("button", name="Menu", exact=True).click()
        page.get_by_role("button", name="Dark/light").click()
        page.keyboard.press("Escape")
        page.get_by_label("Scenario").fill("A ferry crossing at night.")
        _save(page)
        expect(page.locator("#toast")).to_have_text("Saved")
        expect(page.get_by_label("Linked lorebook")).to_have_value("missing:")
        saved = _card(site, "Mira")["data"]
        assert saved["scenario"] == "A ferry crossing at night."
        # what the form did not change is kept
        assert saved["extensions"]["world"] == "Old Atlas"
        assert saved["extensions"]["x_other_tool"] == {"kept": [1, 2]}
        assert saved["alternate_greetings"] == ["Mind the gap, {{user}}.", "Tickets, please."]
        page.goto("/")
        expect(page.get_by_role("link", name="Edit Mira")).to_be_visible()
        screenshot(page, "characters-phone")
        assert errors == []
    finally:
        context.close()
