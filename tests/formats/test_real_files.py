"""Real public files (tests/formats/real_files, listed in its MANIFEST.md) imported and
exported again keep every key and value: extra keys are allowed (a V2 card gains the V1
duplicates SillyTavern writes), a card is compared in its V2 ``chara`` chunk, and an old
instruct template is compared after SillyTavern's migration (:func:`migrate_legacy_instruct`,
documented in the manifest)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from tavernkit.facade import Tavern
from tavernkit.formats.png import read_text_chunks
from tavernkit.models.templates import migrate_legacy_instruct

FILES = Path(__file__).parent / "real_files"
NAMES = sorted(p.name for p in FILES.iterdir() if p.suffix in (".json", ".png"))


def lost(original: Any, written: Any, path: str = "$") -> list[str]:
    """Where ``written`` lost or changed a key or value of ``original`` (extra keys allowed;
    a value must keep its JSON type: ``""`` is not ``[]``, ``100`` is not ``100.0``)."""
    if isinstance(original, dict):
        if not isinstance(written, dict):
            return [f"{path}: object became {type(written).__name__}"]
        out: list[str] = []
        for key, value in original.items():
            if key not in written:
                out.append(f"{path}.{key}: missing")
            else:
                out += lost(value, written[key], f"{path}.{key}")
        return out
    if isinstance(original, list):
        if not isinstance(written, list) or len(written) != len(original):
            return [f"{path}: {original!r:.60} became {written!r:.60}"]
        pairs = enumerate(zip(original, written, strict=True))
        return [m for n, (a, b) in pairs for m in lost(a, b, f"{path}[{n}]")]
    if type(original) is not type(written) or original != written:
        return [f"{path}: {original!r:.60} became {written!r:.60}"]
    return []


def _card_json(png: bytes, keyword: str) -> Any:
    (chunk,) = [c for c in read_text_chunks(png) if c.keyword.lower() == keyword]
    return json.loads(base64.b64decode(chunk.text))


def test_the_manifest_lists_every_file() -> None:
    manifest = (FILES / "MANIFEST.md").read_text("utf-8")
    assert NAMES and all(f"`{name}`" in manifest for name in NAMES)


@pytest.mark.parametrize("name", NAMES)
async def test_import_then_export_keeps_every_key_and_value(tmp_path: Path, name: str) -> None:
    path = FILES / name
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        results = await tk.library.import_file(path)
        (first,) = [r for r in results if r.kind != "lorebook"] or results
        fmt = "png" if path.suffix == ".png" else "json"
        _, written = await tk.library.export_bytes(first.id, fmt, kind=first.kind)
    if path.suffix == ".png":
        original, again = _card_json(path.read_bytes(), "chara"), _card_json(written, "chara")
    else:
        original, again = json.loads(path.read_bytes()), json.loads(written)
        if first.kind == "instruct":
            original = migrate_legacy_instruct(original)
    assert lost(original, again) == []
