"""A JSON file with a byte that is not UTF-8 (a cp1252 quote in a community preset) imports
with the byte replaced by U+FFFD, as SillyTavern reads it, and a warning naming its offset."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tavernkit.facade import Tavern
from tavernkit.formats.bad_bytes import repair_utf8

PRESET = {
    "temperature": 0.7,
    "prompts": [{"identifier": "main", "name": "Main", "content": "It is Mira's ferry."}],
}


def _with_cp1252_quote() -> tuple[bytes, int]:
    good = json.dumps(PRESET).encode()
    at = good.index(b"'")
    return good[:at] + b"\x92" + good[at + 1 :], at  # cp1252's right single quote


async def test_a_preset_with_one_cp1252_byte_imports_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data, offset = _with_cp1252_quote()
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        with caplog.at_level(logging.WARNING, logger="tavernkit.formats"):
            (result,) = await tk.library.import_bytes(data, source="community.json")
        assert result.kind == "chat_preset" and result.status == "imported"
        assert f"0x92 at byte {offset}" in result.note and "U+FFFD" in result.note
        assert f"at byte {offset}" in caplog.text
        stored = await tk.store.get_record("chat_preset", result.id, owner=tk.owner)
        assert stored.data["prompts"][0]["content"] == "It is Mira\ufffds ferry."


def test_valid_utf8_and_binary_data_are_untouched() -> None:
    good = json.dumps({"name": "Mira’s"}, ensure_ascii=False).encode()
    assert repair_utf8(good) == (good, None)
    png = b"\x89PNG\r\n\x1a\n\x92\xff"
    assert repair_utf8(png) == (png, None)


def test_many_bad_bytes_are_counted_and_the_first_listed() -> None:
    data = b'{"a": "' + b"x\xff" * 8 + b'"}'
    fixed, warning = repair_utf8(data, source="f.json")
    assert fixed == ('{"a": "' + "x\ufffd" * 8 + '"}').encode()
    assert warning is not None and warning.startswith("f.json: 8 byte sequence(s)")
    assert "0xff at byte 8" in warning and "and 3 more" in warning


def test_the_import_command_names_the_offset(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tavernkit.cli import app

    data, offset = _with_cp1252_quote()
    path = tmp_path / "community.json"
    path.write_bytes(data)
    result = CliRunner().invoke(app, ["import", str(path), "--home", str(tmp_path / "home")])
    assert result.exit_code == 0, result.output
    assert f"at byte {offset}" in " ".join(result.output.split())
