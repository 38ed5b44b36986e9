"""CHARX keeps everything through the library: every asset (icons, backgrounds, emotions,
other files) and ``module.risum`` are stored on import, reachable from the API, and written
back on export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavernkit.errors import NotFound
from tavernkit.facade import Tavern
from tavernkit.formats.charx import read_charx, write_charx
from tavernkit.library import CardAsset

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
ASSETS = [
    ("icon", "main", "png", "assets/icon/images/main.png", PNG),
    ("background", "dusk", "jpg", "assets/background/images/dusk.jpg", b"\xff\xd8jpeg"),
    ("emotion", "joy", "webp", "assets/emotion/images/joy.webp", b"RIFFwebp"),
    ("other", "theme", "mp3", "assets/other/audio/theme.mp3", b"ID3mp3"),
]
MEMBERS = {path: data for *_, path, data in ASSETS}
MEMBERS["module.risum"] = b"\x00risu module bytes"


def _charx() -> bytes:
    card = {
        "spec": "chara_card_v3",
        "spec_version": "3.0",
        "data": {
            "name": "Zip",
            "assets": [
                {"type": t, "uri": f"embeded://{path}", "name": n, "ext": e}
                for t, n, e, path, _ in ASSETS
            ],
        },
    }
    return write_charx(card, MEMBERS)


async def test_charx_assets_and_module_survive_import_and_export(tmp_path: Path) -> None:
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        (result,) = await tk.library.import_bytes(_charx(), source="zip.charx")
        listed = await tk.library.card_assets("Zip")
        assert [a.ref for a in listed if a.role == "asset"] == [
            f"embeded://{path}" for *_, path, _ in ASSETS
        ]
        assert CardAsset("file", "module.risum") in listed
        joy = CardAsset("asset", "embeded://assets/emotion/images/joy.webp")
        assert await tk.library.card_asset("Zip", joy) == b"RIFFwebp"
        with pytest.raises(NotFound, match="no asset"):
            await tk.library.card_asset("Zip", CardAsset("asset", "embeded://nope.png"))
        with pytest.raises(NotFound, match="no character named 'Zap'"):
            await tk.library.card_assets("Zap")
        _, written = await tk.library.export_bytes(result.id, "charx", kind="character")
    archive = read_charx(written)
    assert {p: archive.files[p] for p in MEMBERS} == MEMBERS
    uris = [a["uri"] for a in archive.card_json["data"]["assets"]]
    assert uris == [f"embeded://{path}" for *_, path, _ in ASSETS]


async def test_replacing_a_charx_drops_the_old_archives_assets(tmp_path: Path) -> None:
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        await tk.library.import_bytes(_charx(), source="zip.charx")
        plain = {"spec": "chara_card_v3", "spec_version": "3.0", "data": {"name": "Zip"}}
        await tk.library.import_bytes(json.dumps(plain).encode(), source="zip.json", replace=True)
        assert await tk.library.card_assets("Zip") == []
