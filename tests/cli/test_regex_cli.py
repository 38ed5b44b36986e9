"""``tavernkit regex``: scripts added, listed, turned off, exported and imported, a card
allowed; and ``tavernkit chat`` storing and showing what the scripts make of a turn."""

from __future__ import annotations

import json
from pathlib import Path

from chat._server import Reply
from cli.test_chat_cli import ThreadServer, cli, home, messages, server

__all__ = ["home", "server"]  # fixtures used here


def test_scripts_are_managed_from_the_command_line(home: Path, tmp_path: Path) -> None:
    added = cli("regex", "add", "Hide OOC", r"/\s*\(OOC:.*?\)/g", "", "-p", "ai")
    assert added.exit_code == 0, added.output
    cli("regex", "add", "Colour", "/colour/g", "color", "-p", "user", "--applies", "stored")
    listed = cli("regex", "list")
    assert "Hide OOC" in listed.output and r"/\s*\(OOC:.*?\)/g" in listed.output
    assert "display only" in listed.output and "stored" in listed.output
    assert cli("regex", "disable", "colour").exit_code == 0
    scripts = json.loads(cli("regex", "list", "--json").output)
    assert [s["disabled"] for s in scripts] == [False, True]
    exported = cli("regex", "export", "Hide OOC")
    assert json.loads(exported.output)["scriptName"] == "Hide OOC"
    file = tmp_path / "copy.json"
    file.write_text(json.dumps({"scriptName": "Copy", "findRegex": "x"}))
    imported = cli("regex", "import", str(file))
    assert imported.exit_code == 0 and "imported Copy" in imported.output
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"findRegex": "x"}))
    refused = cli("regex", "import", str(bad))
    assert refused.exit_code == 1 and "Invalid regex object." in refused.output
    allowed = cli("regex", "allow", "Mira")
    assert allowed.exit_code == 0 and "Mira's scripts run now" in allowed.output
    assert cli("regex", "allow", "Nobody").exit_code == 1


def test_a_turn_stores_and_shows_what_the_scripts_make_of_it(
    home: Path, server: ThreadServer
) -> None:
    cli("regex", "add", "Colour", "/colour/g", "color", "-p", "user", "--applies", "stored")
    cli("regex", "add", "Hide OOC", r"/\s*\(OOC:.*?\)/g", "", "-p", "ai")
    server.script(Reply(text="Red it is (OOC: brb)."))
    result = cli("chat", "Mira", "--once", "The colour red")
    assert result.exit_code == 0, result.output
    assert "shown as: Red it is." in result.output
    assert [m.mes for m in messages(home)][1:] == ["The color red", "Red it is (OOC: brb)."]
