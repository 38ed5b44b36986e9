"""A card and the lorebook imported from its ``character_book`` stay one thing: editing the
book and exporting the card writes the edited book into it; an unedited book leaves the
card's own ``character_book`` exactly as read."""

from __future__ import annotations

import json
from pathlib import Path

from tavernkit.facade import Tavern
from tavernkit.models.lorebook import Lorebook

BOOK = {
    "name": "Ferry lore",
    "extensions": {},
    "entries": [
        {
            "id": 0,
            "keys": ["tide"],
            "secondary_keys": [],
            "comment": "tides",
            "content": "The tide turns at nine.",
            "constant": False,
            "selective": False,
            "insertion_order": 100,
            "enabled": True,
            "position": "before_char",
            "extensions": {"depth": 4},
        }
    ],
}
CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {"name": "Mira", "description": "keeps the ferry", "character_book": BOOK},
}


async def _export(tk: Tavern) -> dict[str, object]:
    _, written = await tk.library.export_bytes("Mira", "json", kind="character")
    data = json.loads(written)["data"]
    assert isinstance(data, dict)
    return data


async def test_editing_the_linked_book_is_exported_with_the_card(tmp_path: Path) -> None:
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        results = await tk.library.import_bytes(json.dumps(CARD).encode(), source="mira.json")
        assert [r.kind for r in results] == ["character", "lorebook"]
        assert (await _export(tk))["character_book"] == BOOK  # unedited: exactly as read

        record = await tk.store.get_record("lorebook", results[1].id, owner=tk.owner)
        book = Lorebook.model_validate(record.data)
        (entry,) = book.entries.values()
        entry.content = "The tide turns at ten now."
        await tk.store.put(
            "lorebook", book, owner=tk.owner, id=record.info.id, name=record.info.name
        )

        exported = await _export(tk)
        character_book = exported["character_book"]
        assert isinstance(character_book, dict)
        (written,) = character_book["entries"]
        assert written["content"] == "The tide turns at ten now."
        assert written["keys"] == ["tide"] and character_book["name"] == "Ferry lore"
        # the stored card itself is untouched: the book is the one source of its entries
        stored = await tk.store.get_record("character", results[0].id, owner=tk.owner)
        assert stored.data["data"]["character_book"] == BOOK
