"""The staples, through the CLI, each checked where it matters: in what the provider receives
(persona, author's note, lorebooks) or in the store (chats, characters)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chat._server import Reply
from cli.test_chat_cli import ThreadServer, chat_ids, cli, home, messages, server

__all__ = ["home", "server"]  # fixtures used here


def _sent(server: ThreadServer) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = server.bodies[-1]["messages"]
    return messages


def _text(server: ThreadServer) -> str:
    return "\n".join(str(m["content"]) for m in _sent(server))


def test_personas_default_per_chat_and_user_name(home: Path, server: ThreadServer) -> None:
    assert cli("persona", "name", "Bob").exit_code == 0
    assert cli("chat", "Mira", "--new", input="/quit\n").exit_code == 0
    assert messages(home)[0].mes == "Welcome aboard, Bob."
    added = cli("persona", "add", "Zed", "-d", "{{user}} is a retired sailor.", "--default")
    assert added.exit_code == 0, added.output
    assert cli("persona", "add", "Ann", "-d", "{{user}} sells tickets.").exit_code == 0
    listed = cli("persona", "list")
    assert "Zed *" in listed.stdout and "Ann" in listed.stdout
    server.script(Reply(text="Ahoy."), Reply(text="Hello, Ann."))
    assert cli("chat", "Mira", "--once", "Hi").exit_code == 0
    assert "Zed is a retired sailor." in _text(server)
    assert messages(home)[-2].name == "Zed"
    result = cli("chat", "Mira", input="/persona Ann\n/persona\nHello\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "in this chat you speak as Ann" in result.stdout
    assert "you speak as Ann" in result.stdout
    assert "Ann sells tickets." in _text(server) and "retired sailor" not in _text(server)
    assert messages(home)[-2].name == "Ann"
    # the lock is the chat's: another chat still gets the default
    assert cli("persona", "default", "--none").exit_code == 0
    assert cli("chat", "Mira", "--new", input="/persona\n/quit\n").stdout.count("speak as Bob")
    bad = cli("persona", "default", "Nobody")
    assert bad.exit_code == 1 and "no persona named 'Nobody'" in bad.stderr


def test_authors_note_reaches_the_prompt_at_its_depth_and_role(
    home: Path, server: ThreadServer
) -> None:
    server.script(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
    script = [
        "/note Keep replies short.",
        "/note depth 0",
        "/note role user",
        "Hello",
        "/note every 2",
        "Again",
        "/note",
        "/quit",
    ]
    result = cli("chat", "Mira", input="\n".join(script) + "\n")
    assert result.exit_code == 0, result.output
    assert "author's note (depth 0, every 2, user): Keep replies short." in result.stdout
    first, second = server.bodies[0]["messages"], server.bodies[1]["messages"]
    # depth 0: after the last message, as the user's role
    assert first[-1] == {"role": "user", "content": "Keep replies short."}
    # every 2nd user message: the second turn has 2 user messages, so it fires; check the 3rd
    assert any(m["content"] == "Keep replies short." for m in second)
    server.script(Reply(text="Four."))
    assert cli("chat", "Mira", "--once", "Third").exit_code == 0
    assert all(m["content"] != "Keep replies short." for m in _sent(server))


def test_chat_and_character_lorebooks_reach_the_scan(home: Path, server: ThreadServer) -> None:
    server.script(Reply(text="a"), Reply(text="b"), Reply(text="c"), Reply(text="d"))
    tide = "The tide turns at nine."
    assert cli("chat", "Mira", "--once", "When is the tide?").exit_code == 0
    assert tide not in _text(server)
    result = cli("chat", "Mira", input="/book ferry\n/book\nThe tide?\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "this chat's lorebook: ferry" in result.stdout
    assert tide in _text(server)
    assert cli("chat", "Mira", input="/book off\nTide again?\n/quit\n").exit_code == 0
    assert tide not in _text(server)
    attached = cli("character", "lorebook", "Mira", "ferry")
    assert attached.exit_code == 0, attached.output
    assert cli("chat", "Mira", "--new", "--once", "And the tide?").exit_code == 0
    assert tide in _text(server)
    assert cli("character", "lorebook", "Mira", "ferry", "--remove").exit_code == 0
    assert cli("character", "lorebook", "Mira", "nosuch").exit_code == 1


def test_chats_list_rename_search_delete(home: Path, server: ThreadServer) -> None:
    server.script(Reply(text="The lighthouse is north."), Reply(text="Fine weather."))
    assert cli("chat", "Mira", "--once", "Where is the lighthouse?").exit_code == 0
    assert cli("chat", "Mira", "--new", "--once", "How is the weather?").exit_code == 0
    first, second = reversed(chat_ids(home))  # newest first
    renamed = cli("chats", "rename", first, "Lighthouse talk")
    assert renamed.exit_code == 0, renamed.output
    listed = cli("chats", "list", "--character", "Mira", "--json")
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert {r["name"] for r in rows} >= {"Lighthouse talk"} and len(rows) == 2
    found = cli("chats", "search", "LIGHTHOUSE north")
    assert found.exit_code == 0, found.output
    (hit,) = found.stdout.splitlines()
    assert hit.startswith("Lighthouse talk #2 Mira: The lighthouse is north.")
    assert "no message contains" in cli("chats", "search", "volcano").stdout
    server.script(Reply(text="Still north."))
    opened = cli("chat", "Mira", input="/open Lighthouse talk\nAnd now?\n/chats\n/quit\n")
    assert opened.exit_code == 0, opened.output
    assert "now in chat Lighthouse talk" in opened.stdout
    assert "Lighthouse talk * 5 messages" in opened.stdout  # the open chat is marked
    assert [m.mes for m in messages(home, first)][-2:] == ["And now?", "Still north."]
    assert "no chat" in cli("chat", "Mira", input="/open nope\n/quit\n").stderr
    kept = cli("chats", "delete", "Lighthouse talk", input="n\n")
    assert kept.exit_code == 1 and len(chat_ids(home)) == 2
    gone = cli("chats", "delete", "Lighthouse talk", "--yes")
    assert gone.exit_code == 0, gone.output
    assert chat_ids(home) == [second]
    assert cli("chats", "rename", second, " ").exit_code == 1


def test_characters_rename_duplicate_delete(home: Path, server: ThreadServer) -> None:
    server.script(Reply(text="Hi."))
    assert cli("chat", "Mira", "--once", "Hello").exit_code == 0
    assert cli("character", "lorebook", "Mira", "ferry").exit_code == 0
    assert cli("character", "rename", "Mira", "Mirabel").exit_code == 0
    shown = cli("show", "Mirabel", "--json")
    assert json.loads(shown.stdout)["data"]["name"] == "Mirabel"
    rows = [json.loads(r) for r in cli("chats", "list", "--json").stdout.splitlines()]
    assert [r["character"] for r in rows] == ["Mirabel"]  # the chat followed
    copy = cli("character", "duplicate", "Mirabel")
    assert copy.exit_code == 0 and "duplicated as Mirabel (copy)" in copy.stdout
    again = cli("character", "duplicate", "Mirabel")
    assert "duplicated as Mirabel (copy) 2" in again.stdout
    clash = cli("character", "rename", "Mirabel (copy)", "Mirabel")
    assert clash.exit_code == 1 and "a character named 'Mirabel' exists already" in clash.stderr
    shown = cli("show", "Mirabel (copy)")
    assert "ferry" in shown.stdout  # its lorebook link was copied
    deleted = cli("character", "delete", "Mirabel", "--chats", "--yes")
    assert deleted.exit_code == 0, deleted.output
    assert "deleted character Mirabel and 1 chats" in deleted.stdout
    assert chat_ids(home) == []
    names = [json.loads(r)["name"] for r in cli("list", "characters", "--json").stdout.splitlines()]
    assert sorted(names) == ["Mirabel (copy)", "Mirabel (copy) 2"]


def test_every_reply_shows_its_swipe_counter(home: Path, server: ThreadServer) -> None:
    server.script(Reply(text="One."), Reply(text="Two."))
    result = cli("chat", "Mira", input="Hi\n/swipe\n/history 1\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "#2 (1/1)" in result.stdout  # the first reply, live
    assert "#2 (2/2)" in result.stdout  # after the swipe, live
    assert "#2 Mira (2/2): Two." in result.stdout  # in /history


def test_quick_replies_send_saved_text_or_run_commands(home: Path, server: ThreadServer) -> None:
    server.script(Reply(text="Nine."), Reply(text="Ten."))
    script = [
        "/qr",
        "/qr add tide When does the /tide turn, {{char}}?",
        "/qr tide",
        "/qr",
        "/quit",
    ]
    result = cli("chat", "Mira", input="\n".join(script) + "\n")
    assert result.exit_code == 0, result.output
    assert "no quick replies; /qr add LABEL TEXT saves one" in result.stdout
    assert "tide When does the /tide turn, {{char}}?" in result.stdout
    # text with a slash inside is a message, its macros evaluated as typed input is
    assert [m.mes for m in messages(home)][1:] == ["When does the /tide turn, Mira?", "Nine."]
    # a reply made only of commands runs them: a new swipe
    script = ["/qr add again /swipe", "/qr again", "/qr remove again", "/qr again", "/quit"]
    result = cli("chat", "Mira", input="\n".join(script) + "\n")
    assert result.exit_code == 0, result.output
    assert messages(home)[-1].swipes == ["Nine.", "Ten."]
    assert "error: no quick reply 'again' (/qr lists them)" in result.stderr
    bad = cli("chat", "Mira", input="/qr add\n/qr remove\n/qr two words\n/quit\n")
    usage = [line for line in bad.stderr.splitlines() if line.startswith("usage: /qr")]
    assert len(usage) == 3, bad.stderr


def test_qr_reaches_the_sets_bound_to_the_chat(
    home: Path, server: ThreadServer, tmp_path: Path
) -> None:
    """``/qr LABEL`` finds a reply in every set on the chat's bar, not only ``Default``: here
    one imported from SillyTavern's JSON and bound to the chat by an STscript line."""
    scene = {
        "version": 2,
        "name": "Scene",
        "disableSend": False,
        "placeBeforeInput": False,
        "injectInput": False,
        "color": "transparent",
        "onlyBorderColor": False,
        "qrList": [
            {"id": 1, "label": "look", "message": "/setvar key=looked yes | /echo looked around"}
        ],
        "idIndex": 1,
    }
    path = tmp_path / "Scene.json"
    path.write_text(json.dumps(scene), encoding="utf-8")
    assert cli("import", str(path)).exit_code == 0
    script = ["/qr look", "/qr-chat-set-on Scene", "/qr", "/qr look", "/quit"]
    result = cli("chat", "Mira", input="\n".join(script) + "\n")
    assert result.exit_code == 0, result.output
    assert "error: no quick reply 'look' (/qr lists them)" in result.stderr  # not bound yet
    assert "look /setvar key=looked yes | /echo looked around" in result.stdout
    assert "\n→ looked around\n" in result.stdout  # run: its toast and pipe
