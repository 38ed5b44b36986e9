"""A folder of cards imported from the character grid in one go: a few files a request
(``POST /import/each``), progress shown as it goes, a bad file reported by name while the
others are imported, hidden files skipped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, Request, expect

from ._site import Site
from .conftest import screenshot

CARDS = 45

# the progress label's texts as the page writes them (the import is quicker than a poll)
_WATCH_PROGRESS = """
window.progressSeen = [];
new MutationObserver(() => {
  const label = document.querySelector(".import-progress span");
  const text = label && label.textContent;
  if (text && window.progressSeen.at(-1) !== text) window.progressSeen.push(text);
}).observe(document.body, { subtree: true, childList: true, characterData: true });
"""


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "cards"
    folder.mkdir()
    for n in range(1, CARDS + 1):
        card = {
            "spec": "chara_card_v2",
            "spec_version": "2.0",
            "data": {"name": f"Folder card {n:03}", "first_mes": f"Hello from {n}."},
        }
        (folder / f"card-{n:03}.json").write_text(json.dumps(card), encoding="utf-8")
    (folder / "notes.txt").write_text("not a card, a lorebook or a chat", encoding="utf-8")
    (folder / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    return folder


def _json(value: object) -> bytes:
    return json.dumps(value).encode()


def _stored_names(site: Site) -> list[str]:
    page: Any = site.call(site.tk.store.list_page("character", limit=500, owner=site.tk.owner))
    return [info.name for info in page.items]


def test_a_folder_of_cards_imports_in_batches_with_progress(
    page: Page, site: Site, tmp_path: Path
) -> None:
    folder = _folder(tmp_path)
    posts: list[str] = []

    def seen(request: Request) -> None:
        if request.method == "POST" and "/import" in request.url:
            posts.append(request.url.rsplit("/", 1)[-1])

    page.on("request", seen)
    page.goto("/")
    expect(page.get_by_role("button", name="choose a folder")).to_be_visible()
    page.evaluate(_WATCH_PROGRESS)
    page.get_by_label("Folder to import").set_input_files(str(folder))

    expect(page.locator("#toast")).to_have_text(
        "Imported Folder card 001, Folder card 002, Folder card 003, Folder card 004, "
        "Folder card 005 and 40 more",
        timeout=30_000,
    )
    refused = page.get_by_role("alert").filter(has_text="notes.txt")
    expect(refused).to_contain_text("cards/notes.txt: not a format tavernkit can import")
    expect(refused).not_to_contain_text("notes.txt: cards/notes.txt")
    expect(page.get_by_role("status").filter(has_text="Importing")).to_have_count(0)
    names = _stored_names(site)
    assert [n for n in names if n.startswith("Folder card")] == [
        f"Folder card {n:03}" for n in range(1, CARDS + 1)
    ]
    # 46 files (the hidden one skipped): 20 a request
    assert posts == ["each", "each", "each"]
    seen_texts = page.evaluate("window.progressSeen")
    assert (
        seen_texts[0] == "Importing 0 of 46 files" and seen_texts[-1] == "Importing 46 of 46 files"
    )
    assert "Importing 20 of 46 files" in seen_texts
    for label, size in (("desktop", (1280, 900)), ("phone", (390, 844))):
        page.set_viewport_size({"width": size[0], "height": size[1]})
        screenshot(page, f"folder-import-{label}")


def test_a_folder_with_taken_names_offers_to_replace_each(page: Page, site: Site) -> None:
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {"name": "Twice", "first_mes": "One."},
    }
    site.call(site.tk.library.import_bytes(json.dumps(card).encode(), source="twice.json"))
    card["data"]["first_mes"] = "Two."
    page.goto("/")
    page.get_by_label("Files to import").set_input_files(
        [
            {
                "name": "twice.json",
                "mimeType": "application/json",
                "buffer": json.dumps(card).encode(),
            },
            {"name": "broken.png", "mimeType": "image/png", "buffer": b"\x89PNG\r\n\x1a\n broken"},
        ]
    )
    conflict = page.get_by_role("alert").filter(has_text="already exists")
    expect(conflict).to_be_visible()
    expect(page.get_by_role("alert").filter(has_text="broken.png")).to_be_visible()
    conflict.get_by_role("button", name="Replace").click()
    expect(page.locator("#toast")).to_contain_text("Replaced Twice")
    stored = site.call(site.tk.store.get_record("character", "Twice", owner=site.tk.owner))
    assert stored.data["data"]["first_mes"] == "Two."
