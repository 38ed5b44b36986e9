"""``tavernkit chat --group NAME`` and ``/trigger NAME`` against the scripted server on
loopback: member replies under their names, stored with their speakers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from chat._server import Reply
from cli.test_chat_cli import ThreadServer, cli, home, server
from tavernkit.facade import Tavern
from tavernkit.models.chat import Message

__all__ = ["home", "server"]  # the fixtures this module uses


def _card(name: str) -> dict[str, Any]:
    return {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {"name": name, "description": f"{name} camps.", "first_mes": f"{name} here."},
    }


def _setup(home: Path, tmp_path: Path, strategy: int, muted: list[str] | None = None) -> None:
    files = []
    for name in ("Alice", "Bob"):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(_card(name)))
        files.append(str(path))
    group = {
        "id": "1",
        "name": "Camp",
        "members": ["Alice.png", "Bob.png"],
        "activation_strategy": strategy,
        "generation_mode": 0,
        "disabled_members": muted or [],
        "chat_id": "",
        "chats": [],
    }
    path = tmp_path / "camp.json"
    path.write_text(json.dumps(group))
    result = cli("import", *files, str(path))
    assert result.exit_code == 0, result.output


def _group_chat(home: Path) -> list[Message]:
    async def load() -> list[Message]:
        async with Tavern(home, load_plugins=False) as tk:
            group = await tk.store.get_record("group", "Camp", owner=tk.owner)
            stored = await tk.store.load_chat(group.data["chat_id"], owner=tk.owner)
            return [Message.model_validate(m.data) for m in stored.messages]

    return asyncio.run(load())


def test_group_once_every_member_replies_in_list_order(
    home: Path, server: ThreadServer, tmp_path: Path
) -> None:
    _setup(home, tmp_path, strategy=1)
    server.script(Reply(text="Alice answers."), Reply(text="Bob answers."))
    result = cli("chat", "--group", "Camp", "--once", "Report in.")
    assert result.exit_code == 0, result.output
    assert "Alice" in result.output and "Alice answers." in result.output
    assert "Bob answers." in result.output
    got = _group_chat(home)
    assert [(m.name, m.mes) for m in got] == [
        ("Alice", "Alice here."),
        ("Bob", "Bob here."),
        ("User", "Report in."),
        ("Alice", "Alice answers."),
        ("Bob", "Bob answers."),
    ]
    assert [m.original_avatar for m in got if not m.is_user] == ["Alice.png", "Bob.png"] * 2
    nudge = server.bodies[1]["messages"][-1]
    assert nudge == {"role": "system", "content": "[Write the next reply only as Bob.]"}


def test_manual_group_trigger_and_json(home: Path, server: ThreadServer, tmp_path: Path) -> None:
    _setup(home, tmp_path, strategy=2, muted=["Bob.png"])
    server.script(Reply(text="Bob speaks anyway."))
    script = "Just a note.\n/trigger bob\n/trigger\n/trigger Zed\n/quit\n"
    result = cli("chat", "--group", "Camp", input=script)
    assert result.exit_code == 0, result.output
    assert "nobody replies" in result.output
    assert "Bob speaks anyway." in result.output
    assert "usage: /trigger NAME" in result.output
    assert "no member 'Zed'" in result.output
    got = _group_chat(home)
    assert [(m.name, m.mes) for m in got][-2:] == [
        ("User", "Just a note."),
        ("Bob", "Bob speaks anyway."),
    ]
    assert len(server.bodies) == 1

    server.script(Reply(text="Alice, in JSON."))
    result = cli("chat", "--group", "Camp", "--json", input="/trigger Alice\n/quit\n")
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    done = [e for e in events if e["event"] == "done"]
    assert [(e["member"], e["text"], e["status"]) for e in done] == [
        ("Alice", "Alice, in JSON.", "completed")
    ]


def test_trigger_outside_a_group_and_group_with_a_character_are_refused(
    home: Path, tmp_path: Path
) -> None:
    _setup(home, tmp_path, strategy=1)
    result = cli("chat", "Mira", input="/trigger Alice\n/quit\n")
    assert "this is not a group chat" in result.output
    result = cli("chat", "Mira", "--group", "Camp", "--once", "hi")
    assert result.exit_code == 2 and "not both" in result.output
    result = cli("chat", "--group", "Nope", "--once", "hi")
    assert result.exit_code == 1 and "Nope" in result.output


def test_group_export_and_group_chat_import_through_the_cli(
    home: Path, server: ThreadServer, tmp_path: Path
) -> None:
    _setup(home, tmp_path, strategy=1)
    target = tmp_path / "out.json"
    result = cli("export", "Camp", "--format", "json", "-o", str(target))
    assert result.exit_code == 0, result.output
    exported = json.loads(target.read_text())
    assert exported["members"] == ["Alice.png", "Bob.png"] and exported["name"] == "Camp"
    header = {"chat_metadata": {}, "user_name": "unused", "character_name": "unused"}
    line = {"name": "Bob", "is_user": False, "mes": "Old times.", "original_avatar": "Bob.png"}
    chat = tmp_path / "old camp.jsonl"
    chat.write_text(json.dumps(header) + "\n" + json.dumps(line))
    exported["chats"] = ["old camp"]
    group_file = tmp_path / "camp2.json"
    group_file.write_text(json.dumps(exported))
    result = cli("import", "--replace", str(group_file), str(chat))
    assert result.exit_code == 0, result.output
    server.script(Reply(text="Alice remembers."), Reply(text="Bob too."))
    result = cli("chat", "--group", "Camp", "--chat", "old camp", "--once", "Remember?")
    assert result.exit_code == 0, result.output
    assert "Alice remembers." in result.output


def test_resuming_a_group_chat_by_name_is_a_group_session(
    home: Path, server: ThreadServer, tmp_path: Path
) -> None:
    _setup(home, tmp_path, strategy=2)
    assert cli("chat", "--group", "Camp", "--once", "noted").exit_code == 0
    chat_name = _group_chat_name(home)
    server.script(Reply(text="Alice, resumed."))
    result = cli("chat", "--chat", chat_name, input="/trigger Alice\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "Alice, resumed." in result.output


def _group_chat_name(home: Path) -> str:
    async def load() -> str:
        async with Tavern(home, load_plugins=False) as tk:
            group = await tk.store.get_record("group", "Camp", owner=tk.owner)
            return str(group.data["chat_id"])

    return asyncio.run(load())


def test_prompt_shows_a_members_turn(home: Path, tmp_path: Path, server: ThreadServer) -> None:
    _setup(home, tmp_path, strategy=2)
    assert cli("chat", "--group", "Camp", "--once", "noted").exit_code == 0
    result = cli("prompt", _group_chat_name(home), "--member", "Bob", "--format", "json")
    assert result.exit_code == 0, result.output
    assert "[Write the next reply only as Bob.]" in result.output
    assert server.bodies == []


def test_list_groups_and_import_a_chat_into_a_named_group(home: Path, tmp_path: Path) -> None:
    _setup(home, tmp_path, strategy=1)
    listed = cli("list", "groups")
    assert listed.exit_code == 0 and "Camp" in listed.output
    header = {"chat_metadata": {}, "user_name": "unused", "character_name": "unused"}
    line = {"name": "User", "is_user": True, "mes": "Anyone?"}
    chat = tmp_path / "lonely.jsonl"
    chat.write_text(json.dumps(header) + "\n" + json.dumps(line))
    result = cli("import", "--group", "Camp", str(chat))
    assert result.exit_code == 0, result.output
    shown = cli("show", "Camp", "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["chats"] == ["lonely"]


def test_group_commands_make_and_edit_a_group(
    home: Path, server: ThreadServer, tmp_path: Path
) -> None:
    for name in ("Alice", "Bob"):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(_card(name)))
        assert cli("import", str(path)).exit_code == 0
    made = cli("group", "create", "Duo", "Alice", "Bob", "--strategy", "list")
    assert made.exit_code == 0, made.output
    assert "created Duo: Alice, Bob (list, swap)" in made.output
    assert cli("group", "create", "Duo", "Alice").exit_code == 1  # taken
    assert "no character" in cli("group", "create", "Trio", "Nobody").output.lower()
    muted = cli("group", "mute", "Duo", "bob")
    assert "Alice, Bob (muted)" in muted.output
    added = cli("group", "add", "Duo", "Mira")
    assert "Duo: Mira, Alice, Bob (muted)" in added.output  # added first, as ST adds
    assert cli("group", "add", "Duo", "Mira").exit_code == 1
    changed = cli("group", "set", "Duo", "--mode", "join", "--self", "--prefix", "[<FIELDNAME>]")
    assert "(list, join)" in changed.output
    assert cli("group", "set", "Duo", "--strategy", "loud").exit_code == 1
    assert "Duo: Alice, Bob (muted)" in cli("group", "remove", "Duo", "0").output

    server.script(Reply(text="Alice speaks."))
    result = cli("chat", "--group", "Duo", "--once", "Hello?")
    assert result.exit_code == 0, result.output
    body = server.bodies[-1]["messages"]
    assert body[1]["content"].startswith("[Description]")  # join mode with the prefix
    unmuted = cli("group", "unmute", "Duo", "Bob")
    assert "Bob (muted)" not in unmuted.output
