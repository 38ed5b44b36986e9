"""``tavernkit preset``: prompt-manager edits on a stored preset, end to end through the CLI
and a real store; every edit must leave a preset SillyTavern can read (its own JSON shape)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tavernkit.cli import app
from tavernkit.models.preset import ChatCompletionPreset

runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture
def preset(tmp_path: Path) -> str:
    path = tmp_path / "House.json"
    data = ChatCompletionPreset.create().to_wire()
    data["x_unknown_key"] = {"kept": True}
    path.write_text(json.dumps(data), encoding="utf-8")
    code, output = run("import", str(path))
    assert code == 0, output
    return "House"


def rows(name: str) -> list[dict[str, Any]]:
    code, output = run("preset", "show", name, "--json")
    assert code == 0, output
    return [json.loads(line) for line in output.splitlines()]


def stored(name: str) -> dict[str, Any]:
    code, output = run("show", name, "--kind", "chat_preset", "--json")
    assert code == 0, output
    data: dict[str, Any] = json.loads(output)
    return data


def order_of(name: str) -> list[str]:
    return [r["identifier"] for r in rows(name)]


def test_show_lists_the_global_order(preset: str) -> None:
    assert order_of(preset) == [
        "main",
        "worldInfoBefore",
        "personaDescription",
        "charDescription",
        "charPersonality",
        "scenario",
        "enhanceDefinitions",
        "nsfw",
        "worldInfoAfter",
        "dialogueExamples",
        "chatHistory",
        "jailbreak",
    ]
    code, output = run("preset", "show", preset)
    assert code == 0 and "Main Prompt" in output and "[marker]" in output


def test_toggle_flips_and_sets(preset: str) -> None:
    code, output = run("preset", "toggle", preset, "enhanceDefinitions")
    assert code == 0 and "enabled" in output
    assert next(r for r in rows(preset) if r["identifier"] == "enhanceDefinitions")["enabled"]
    code, output = run("preset", "toggle", preset, "enhanceDefinitions", "--off")
    assert code == 0 and "disabled" in output
    code, output = run("preset", "toggle", preset, "enhanceDefinitions", "--off")
    assert code == 0 and "disabled" in output
    assert not next(r for r in rows(preset) if r["identifier"] == "enhanceDefinitions")["enabled"]
    data = stored(preset)
    assert data["x_unknown_key"] == {"kept": True}  # unknown keys survive the edit
    global_order = next(o for o in data["prompt_order"] if o["character_id"] == 100001)
    assert {"identifier": "enhanceDefinitions", "enabled": False} in global_order["order"]


def test_move_by_position_and_after(preset: str) -> None:
    code, output = run("preset", "move", preset, "jailbreak", "0")
    assert code == 0 and "position 0" in output
    assert order_of(preset)[:2] == ["jailbreak", "main"]
    code, _ = run("preset", "move", preset, "jailbreak", "--after", "chatHistory")
    assert code == 0
    assert order_of(preset)[-2:] == ["chatHistory", "jailbreak"]
    code, _ = run("preset", "move", preset, "main", "--", "-1")  # negatives after --
    assert code == 0 and order_of(preset)[-1] == "main"
    code, output = run("preset", "move", preset, "main")
    assert code == 2 and "POSITION or --after" in output


def test_add_set_remove_custom_prompt(preset: str) -> None:
    code, output = run(
        "preset", "add", preset, "style", "--content", "Be vivid.", "--after", "main",
        "--in-chat", "--depth", "2", "--name", "Style",
    )  # fmt: skip
    assert code == 0, output
    row = rows(preset)[1]
    assert row["identifier"] == "style" and row["name"] == "Style"
    assert (row["in_chat"], row["depth"], row["order"], row["role"]) == (True, 2, 100, "system")

    code, output = run(
        "preset", "set", preset, "style", "--role", "user", "--order", "50",
        "--trigger", "normal", "--trigger", "swipe", "--content", "Be terse.",
    )  # fmt: skip
    assert code == 0, output
    row = rows(preset)[1]
    assert (row["role"], row["order"], row["content"]) == ("user", 50, "Be terse.")
    assert row["triggers"] == ["normal", "swipe"]
    code, _ = run("preset", "set", preset, "style", "--position", "relative", "--all-triggers")
    assert code == 0
    row = rows(preset)[1]
    assert not row["in_chat"] and row["triggers"] == []

    # the stored JSON is SillyTavern's prompt shape
    prompt = next(p for p in stored(preset)["prompts"] if p["identifier"] == "style")
    assert prompt["injection_position"] == 0 and prompt["system_prompt"] is False

    code, output = run("preset", "remove", preset, "style")
    assert code == 0 and "removed style" in output
    assert "style" not in order_of(preset)
    assert all(p["identifier"] != "style" for p in stored(preset)["prompts"])


def test_errors_are_one_line_with_exit_codes(preset: str) -> None:
    code, output = run("preset", "remove", preset, "main")
    assert code == 1 and "built-in prompt" in output
    code, output = run("preset", "show", "Nope")
    assert code == 1 and "error:" in output
    code, output = run("preset", "set", preset, "main", "--role", "narrator")
    assert code == 1 and "role must be one of" in output
    code, output = run("preset", "set", preset, "charDescription", "--content", "x")
    assert code == 1 and "marker" in output
    code, output = run("preset", "set", preset, "main")
    assert code == 2 and "nothing to set" in output
    code, output = run("preset", "add", preset, "main", "--content", "again")
    assert code == 1 and "already exists" in output
    code, output = run("preset", "toggle", preset, "ghost")
    assert code == 1 and "no prompt 'ghost'" in output
