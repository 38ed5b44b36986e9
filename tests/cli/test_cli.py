"""The CLI end to end: real files, a real SQLite store in an isolated TAVERNKIT_HOME."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tavernkit.cli import app
from tavernkit.formats.png import read_text_chunks

DEMO = Path(__file__).resolve().parents[2] / "src" / "tavernkit" / "data" / "wren.json"

runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def test_import_show_list_demo_card() -> None:
    code, output = run("import", str(DEMO))
    assert code == 0, output
    assert "imported character Wren" in output
    assert "imported lorebook Saltmarrow" in output
    code, output = run("import", str(DEMO))
    assert code == 0 and "unchanged character Wren" in output
    code, output = run("show", "Wren")
    assert code == 0 and "lighthouse" in output and "Saltmarrow" in output
    code, output = run("list", "characters", "--json")
    rows = [json.loads(line) for line in output.splitlines()]
    assert [r["name"] for r in rows] == ["Wren"]
    code, output = run("show", "Saltmarrow", "--json")
    book = json.loads(output)
    assert [e["key"][0] for e in book["entries"].values()] == ["lamp", "reef", "causeway"]


def test_export_json_round_trips_demo_card(tmp_path: Path) -> None:
    assert run("import", str(DEMO))[0] == 0
    out = tmp_path / "wren.json"
    code, output = run("export", "Wren", "--format", "json", "-o", str(out))
    assert code == 0, output
    exported = json.loads(out.read_text("utf-8"))
    original = json.loads(DEMO.read_text("utf-8"))
    assert exported["data"] == original["data"]
    assert exported["spec"] == "chara_card_v2"
    assert exported["name"] == "Wren"  # SillyTavern's V1 duplicates at the top level


def test_seraphina_png_export_keeps_card_and_pixels(st_default_data: Path, tmp_path: Path) -> None:
    pil = pytest.importorskip("PIL.Image")
    card = st_default_data / "default_Seraphina.png"
    code, output = run("import", str(card), str(st_default_data / "Eldoria.json"))
    assert code == 0, output
    out = tmp_path / "out.png"
    code, output = run("export", "Seraphina", "--format", "png", "-o", str(out))
    assert code == 0, output
    before = {c.keyword: c.text for c in read_text_chunks(card.read_bytes())}
    after = {c.keyword: c.text for c in read_text_chunks(out.read_bytes())}
    assert set(after) == {"chara", "ccv3"}
    assert after == before
    with pil.open(card) as a, pil.open(out) as b:
        assert a.size == b.size and a.tobytes() == b.tobytes()


def test_import_reports_bad_file_and_keeps_going(tmp_path: Path) -> None:
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    code, output = run("import", str(bad), str(DEMO))
    assert code == 1
    assert "broken.png" in output
    assert "imported character Wren" in output


def test_unknown_record_is_one_line_error() -> None:
    code, output = run("show", "Nobody")
    assert code == 1
    assert "no character, lorebook" in output and "Traceback" not in output


def test_conflicting_import_needs_replace(tmp_path: Path) -> None:
    assert run("import", str(DEMO))[0] == 0
    changed = json.loads(DEMO.read_text("utf-8"))
    changed["data"]["personality"] = "different"
    del changed["data"]["character_book"]
    other = tmp_path / "wren2.json"
    other.write_text(json.dumps(changed), "utf-8")
    code, output = run("import", str(other))
    assert code == 1 and "--replace" in output
    code, output = run("import", "--replace", str(other))
    assert code == 0 and "replaced character Wren" in output
    code, output = run("show", "Wren", "--json")
    assert json.loads(output)["data"]["personality"] == "different"


def test_chat_import_attaches_and_exports_losslessly(tmp_path: Path) -> None:
    assert run("import", str(DEMO))[0] == 0
    lines = [
        {"chat_metadata": {"integrity": "x"}, "user_name": "unused", "character_name": "unused"},
        {"name": "Wren", "is_user": False, "send_date": "June 19, 2023 2:20pm", "mes": "Hi"},
        {"name": "User", "is_user": True, "send_date": 1687184400000, "mes": "Hello"},
    ]
    src = tmp_path / "Wren - first.jsonl"
    src.write_text("\n".join(json.dumps(x, separators=(",", ":")) for x in lines), "utf-8")
    code, output = run("import", "--character", "Wren", str(src))
    assert code == 0, output
    code, output = run("list", "chats", "--json")
    (row,) = [json.loads(line) for line in output.splitlines()]
    assert row["character"] == "Wren" and row["messages"] == 2
    out = tmp_path / "back.jsonl"
    code, output = run("export", "Wren - first", "--format", "jsonl", "-o", str(out))
    assert code == 0, output
    assert out.read_text("utf-8") == src.read_text("utf-8")


def test_export_rejects_wrong_format(tmp_path: Path) -> None:
    assert run("import", str(DEMO))[0] == 0
    code, output = run("export", "Saltmarrow", "--format", "png", "-o", str(tmp_path / "x"))
    assert code == 1 and "cannot be exported as 'png'" in output
    assert not (tmp_path / "x").exists()
