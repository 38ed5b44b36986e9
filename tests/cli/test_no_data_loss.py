"""Commands that fail write nothing, bad paths are one error line (never a traceback), and
re-importing our own exports is recognised as the same records (no duplicates, no refusals)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tavernkit.cli import app
from tavernkit.facade import Tavern

DEMO = Path(__file__).resolve().parents[2] / "src" / "tavernkit" / "data" / "wren.json"
runner = CliRunner()


def run(*args: str, input: str | None = None) -> Any:
    return runner.invoke(app, list(args), input=input)


def rows(what: str) -> list[dict[str, Any]]:
    result = run("list", what, "--json")
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def _one_error_line(result: Any) -> str:
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception  # not a traceback
    (line,) = result.stderr.splitlines()
    return str(line)


def test_export_into_a_missing_folder_or_onto_a_folder_is_an_error(tmp_path: Path) -> None:
    assert run("import", str(DEMO)).exit_code == 0
    missing = tmp_path / "nope" / "wren.json"
    line = _one_error_line(run("export", "Wren", "-f", "json", "-o", str(missing)))
    assert line == f"error: {missing}: the folder {missing.parent} does not exist; create it first"
    line = _one_error_line(run("export", "Wren", "-f", "json", "-o", str(tmp_path)))
    assert line == f"error: {tmp_path}: is a folder; name the file to write"
    assert list(tmp_path.iterdir()) == []  # no part file left anywhere


def test_a_home_that_is_a_file_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.write_text("not a folder")
    monkeypatch.setenv("TAVERNKIT_HOME", str(home))
    line = _one_error_line(run("list", "characters"))
    assert line == (
        f"error: the data folder {home} is a file, not a folder (check TAVERNKIT_HOME or --home)"
    )
    assert home.read_text() == "not a folder"


def _settings_json(tmp_path: Path, instruct_body: str) -> Path:
    data = {
        "main_api": "openai",
        "username": "Zed",
        "power_user": {
            "instruct": {"preset": "Mine", "input_sequence": instruct_body},
            "personas": {"zed.png": "Zed"},
            "persona_descriptions": {"zed.png": {"description": "A sailor."}},
        },
    }
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(data))
    return path


def test_a_failed_settings_import_leaves_the_settings_as_they_were(tmp_path: Path) -> None:
    first = _settings_json(tmp_path, "### In:")
    assert run("import", str(first)).exit_code == 0, "setup"
    before = run("show", "Zed", "--kind", "persona", "--json").stdout
    # the same template name with other content: a conflict, found before any write
    (tmp_path / "b").mkdir()
    other = _settings_json(tmp_path / "b", "### Other:")
    data = json.loads(other.read_text())
    data["username"] = "Changed"
    data["power_user"]["persona_descriptions"]["zed.png"]["description"] = "Changed."
    other.write_text(json.dumps(data))
    line = _one_error_line(run("import", str(other)))
    assert "an instruct template named 'Mine' already exists and differs" in line
    assert run("show", "Zed", "--kind", "persona", "--json").stdout == before
    assert asyncio.run(_user_name()) == "Zed"


async def _user_name() -> str:
    async with Tavern(load_plugins=False) as tk:
        return (await tk.settings()).selections.user_name


def test_reimporting_settings_updates_its_personas_instead_of_adding_copies(
    tmp_path: Path,
) -> None:
    path = _settings_json(tmp_path, "### In:")
    assert run("import", str(path)).exit_code == 0
    again = run("import", str(path))
    assert again.exit_code == 0, again.output
    assert "unchanged persona Zed" in again.stdout
    assert [r["name"] for r in rows("personas")] == ["Zed"]


@pytest.mark.parametrize(
    ("fmt", "spec"), [("json", "v2"), ("json", "v3"), ("charx", "v2"), ("png", "v2")]
)
def test_reimporting_our_own_card_export_is_unchanged(tmp_path: Path, fmt: str, spec: str) -> None:
    assert run("import", str(DEMO)).exit_code == 0
    out = tmp_path / f"exported.{fmt}"
    exported = run("export", "Wren", "-f", fmt, "--spec", spec, "-o", str(out))
    assert exported.exit_code == 0, exported.output
    again = run("import", str(out))
    assert again.exit_code == 0, again.output
    assert "unchanged character Wren" in again.stdout
    assert [r["name"] for r in rows("characters")] == ["Wren"]


def test_a_reimported_lorebook_or_chat_is_known_by_content_not_file_name(tmp_path: Path) -> None:
    assert run("import", str(DEMO)).exit_code == 0
    book = tmp_path / "my-export-copy.json"
    assert run("export", "Saltmarrow", "-f", "json", "-o", str(book)).exit_code == 0
    again = run("import", str(book))
    assert again.exit_code == 0, again.output
    assert "unchanged lorebook Saltmarrow" in again.stdout
    assert [r["name"] for r in rows("lorebooks")] == ["Saltmarrow"]

    assert run("chat", "Wren", "--new", input="/quit\n").exit_code == 0
    (chat,) = rows("chats")
    exported = tmp_path / "whatever.jsonl"
    assert run("export", chat["id"], "-f", "jsonl", "-o", str(exported)).exit_code == 0
    renamed = tmp_path / "renamed.jsonl"
    renamed.write_bytes(exported.read_bytes())
    for path in (exported, renamed):
        result = run("import", str(path))
        assert result.exit_code == 0, result.output
        assert f"unchanged chat {chat['name']}" in result.stdout
    assert len(rows("chats")) == 1
    # another store imports it under the content's name, attached to the character
    fresh = tmp_path / "fresh"
    assert run("import", str(DEMO), "--home", str(fresh)).exit_code == 0
    assert run("import", str(renamed), "--home", str(fresh)).exit_code == 0
    listed = run("list", "chats", "--json", "--home", str(fresh))
    (copy,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (copy["name"], copy["character"]) == (chat["name"], "Wren")


def test_a_branch_sharing_its_main_chats_integrity_imports_as_its_own_chat(
    tmp_path: Path,
) -> None:
    assert run("import", str(DEMO)).exit_code == 0
    assert run("chat", "Wren", "--new", input="/quit\n").exit_code == 0
    (chat,) = rows("chats")
    main_file = tmp_path / "main.jsonl"
    assert run("export", chat["id"], "-f", "jsonl", "-o", str(main_file)).exit_code == 0
    header, *messages = [json.loads(line) for line in main_file.read_text().splitlines()]
    # SillyTavern's branch: the same integrity id, main_chat set, the messages up to a point
    header["chat_metadata"]["main_chat"] = chat["name"]
    edited = {**messages[0], "mes": "A different start."}
    branch = tmp_path / "Branch #0 - 2026-01-01@10h00m00s.jsonl"
    branch.write_text("\n".join(json.dumps(x) for x in (header, edited)) + "\n")
    result = run("import", str(branch))
    assert result.exit_code == 0, result.output
    assert "imported chat Branch #0 - 2026-01-01@10h00m00s" in result.stdout
    assert sorted(r["name"] for r in rows("chats")) == sorted(
        [chat["name"], "Branch #0 - 2026-01-01@10h00m00s"]
    )
