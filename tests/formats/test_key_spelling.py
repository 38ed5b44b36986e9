"""Every key is written back exactly as read: a world-info key spelled like the Python attribute
(``automation_id`` where SillyTavern writes ``automationId``) is not re-spelled on export."""

from __future__ import annotations

import json
from pathlib import Path

from tavernkit.facade import Tavern
from tavernkit.models.character import Character
from tavernkit.models.lorebook import LoreEntry

ENTRY = {"uid": 0, "key": ["tide"], "content": "x", "automation_id": "auto-1", "depth": 4}


async def test_an_attribute_spelled_key_survives_import_and_export(tmp_path: Path) -> None:
    book = {"entries": {"0": ENTRY}}
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        (result,) = await tk.library.import_bytes(json.dumps(book).encode(), source="b.json")
        _, written = await tk.library.export_bytes(result.id, "json", kind="lorebook")
    entry = json.loads(written)["entries"]["0"]
    assert list(entry)[:5] == list(ENTRY)  # same keys, same order, same spelling
    assert entry["automation_id"] == "auto-1" and "automationId" not in entry


def test_models_write_back_the_spelling_they_read() -> None:
    by_name = LoreEntry.model_validate({"automation_id": "a", "use_probability": False})
    assert by_name.automation_id == "a" and by_name.use_probability is False
    assert by_name.to_wire() == {"automation_id": "a", "use_probability": False}
    by_alias = LoreEntry.model_validate({"automationId": "a"})
    assert by_alias.to_wire() == {"automationId": "a"}
    # a copy keeps the spelling; a model without aliases is unaffected
    assert by_name.model_copy(update={"content": "c"}).to_wire()["automation_id"] == "a"
    assert Character.model_validate({"name": "N", "tags": []}).to_wire() == {
        "name": "N",
        "tags": [],
    }
