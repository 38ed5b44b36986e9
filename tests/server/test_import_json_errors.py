"""The import route refuses a broken JSON file with a typed error naming its line, column
and the character found there."""

from __future__ import annotations

from pathlib import Path

from ._live import live_server
from .conftest import settings


async def test_import_names_where_a_json_file_breaks(tmp_path: Path) -> None:
    async with live_server(settings(tmp_path / "home")) as server, server.client() as c:
        broken = b'{"spec": "chara_card_v2",\n "data": {"name": "Wren",}}'
        r = await c.post("/import", files={"file": ("wren.json", broken)})
        assert r.status_code == 422
        error = r.json()["error"]
        assert error["type"] == "FormatError"
        assert "invalid JSON at line 2, column 26: unexpected '}'" in error["message"]
