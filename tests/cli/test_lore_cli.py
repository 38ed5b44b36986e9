"""``tavernkit lore test``: every entry of a book, fired or not and why, for a message or a
stored chat (a real SQLite store in the isolated TAVERNKIT_HOME)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from tavernkit.cli import app
from tavernkit.cli.lore import position_label

DEMO = Path(__file__).resolve().parents[2] / "src" / "tavernkit" / "data" / "wren.json"

runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def rows_of(output: str) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in output.splitlines() if line.strip()]
    return {row["comment"]: row for row in rows}


def book_file(tmp_path: Path) -> Path:
    def entry(uid: int, keys: list[str], content: str, **extra: Any) -> dict[str, Any]:
        base: dict[str, Any] = {
            "uid": uid,
            "key": keys,
            "keysecondary": [],
            "comment": f"e{uid}",
            "content": content,
            "constant": False,
            "selective": True,
            "selectiveLogic": 0,
            "order": 100 - uid,
            "position": 0,
            "disable": False,
            "probability": 100,
            "useProbability": True,
        }
        base.update(extra)
        return base

    entries = [
        entry(0, ["/drag(on|oon)s?/i"], "Dragons nest in the old keep."),
        entry(1, ["keep"], "The keep has a moat.", position=4, depth=2, role=0),
        entry(2, ["sword"], "x", keysecondary=["shield", "armor"], selectiveLogic=1),
        entry(3, [], "Always here.", constant=True),
        entry(4, ["dragon"], "Rare.", probability=1),
        entry(5, ["dragon"], "a", group="beasts", groupOverride=True),
        entry(6, ["dragon"], "b", group="beasts"),
        entry(7, ["unicorn"], "never"),
    ]
    path = tmp_path / "Keep.json"
    path.write_text(json.dumps({"entries": {str(e["uid"]): e for e in entries}}), "utf-8")
    return path


def test_lore_test_text_explains_every_entry(tmp_path: Path) -> None:
    code, output = run("import", str(book_file(tmp_path)))
    assert code == 0, output
    text = "A DRAGOON, a dragon, a sword and a shield"
    code, output = run("lore", "test", "Keep", "--text", text, "--seed", "3", "--json")
    assert code == 0, output
    rows = rows_of(output)
    assert len(rows) == 8
    assert rows["e0"]["fired"] and rows["e0"]["reason"] == "key"
    assert rows["e0"]["primary_key"] == "/drag(on|oon)s?/i" and rows["e0"]["primary_regex"]
    assert rows["e1"]["fired"] and rows["e1"]["loop"] == 1 and rows["e1"]["primary_key"] == "keep"
    assert rows["e1"]["position_label"] == "@D2 system"
    assert rows["e2"]["fired"] and rows["e2"]["logic"] == "NOT_ALL"
    assert rows["e2"]["secondary_keys"] == ["armor"]
    assert rows["e3"]["reason"] == "constant"
    assert rows["e4"]["reason"] == "probability" and not rows["e4"]["fired"]
    assert rows["e6"]["reason"] == "group" and rows["e6"]["group_winner"] == "Keep.5"
    assert rows["e7"]["reason"] == "no_match"
    assert rows["e0"]["tokens"] > 0 and rows["e0"]["position_label"] == "before char"
    # the rich table: one line per entry with the reason
    code, output = run("lore", "test", "Keep", "--text", "a dragon", "--seed", "3")
    assert code == 0, output
    assert "entries fire" in output and "e7" in output and "no key matched" in output
    assert "regex" in output and "recursion level 1" in output


def test_lore_test_chat_uses_the_stored_chat(tmp_path: Path) -> None:
    assert run("import", str(DEMO))[0] == 0
    chat = tmp_path / "wren.jsonl"
    lines = [
        {"user_name": "User", "character_name": "Wren", "chat_metadata": {}},
        {"name": "Wren", "is_user": False, "mes": "Evening.", "send_date": "2024-01-01"},
        {"name": "User", "is_user": True, "mes": "When is the tide?", "send_date": "2024-01-01"},
    ]
    chat.write_text("\n".join(json.dumps(x) for x in lines) + "\n", "utf-8")
    code, output = run("import", str(chat), "--character", "Wren")
    assert code == 0, output
    code, output = run("list", "chats", "--json")
    (chat_row,) = [json.loads(line) for line in output.splitlines() if line.strip()]
    code, output = run("lore", "test", "Saltmarrow", "--chat", chat_row["id"], "--json")
    assert code == 0, output
    rows = rows_of(output)
    assert set(rows) == {"The lamp", "The reef", "The causeway"}
    assert rows["The causeway"]["fired"] and rows["The causeway"]["primary_key"] == "tide"
    assert "'tide'" in rows["The causeway"]["why"]
    assert not rows["The lamp"]["fired"] and rows["The lamp"]["reason"] == "no_match"


def test_lore_test_needs_exactly_one_source() -> None:
    code, output = run("lore", "test", "Keep")
    assert code == 1 and "--chat" in output
    code, output = run("lore", "test", "Nope", "--text", "hi")
    assert code == 1 and "Traceback" not in output


def test_position_labels() -> None:
    assert position_label(0, None, None) == "before char"
    assert position_label(4, None, None) == "@D4 system"
    assert position_label(4, 0, 2) == "@D0 assistant"
    assert position_label(7, None, None, "notes") == "outlet notes"
    assert position_label("odd", None, None) == "odd"
