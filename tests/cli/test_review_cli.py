"""Response review, the fallback randomizer and a profile's bound preset, reached from the
command line: ``profile add --review/--preset``, ``profile review``, ``profile fallback NAME
randomize|ordered`` and ``tavernkit chat --review``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chat._server import Reply
from cli.test_chat_cli import ThreadServer, cli, home, server

__all__ = ["home", "server"]  # fixtures used here


def verdict(result: str, *findings: tuple[str, str, str]) -> str:
    data = [{"category": c, "problem": p, "direction": d} for c, p, d in findings]
    return json.dumps({"verdict": result, "findings": data})


def test_chat_review_flag_reviews_and_revises(
    home: Path, server: ThreadServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TK_TEST_KEY", "sk-test-key")
    server.script(
        Reply(text="Draft one."),
        Reply(text=verdict("revise", ("voice", "flat", "warmer"))),
        Reply(text="Welcome, friend."),
        Reply(text=verdict("pass")),
    )
    result = cli("chat", "Mira", "--review", "inherited", "--once", "Hello?")
    assert result.exit_code == 0, result.output
    assert "Welcome, friend." in result.output and "Draft one." not in result.output
    assert ["response_format" in b for b in server.bodies] == [False, True, False, True]
    # kept for the chat: the next turn is reviewed without the flag
    server.script(Reply(text="Aye."), Reply(text=verdict("pass")))
    again = cli("chat", "Mira", "--once", "Ready?")
    assert again.exit_code == 0, again.output
    assert len(server.bodies) == 6


def test_chat_review_with_a_missing_reviewer_writes_nothing(
    home: Path, server: ThreadServer
) -> None:
    result = cli("chat", "Mira", "--review", "ghost", "--once", "Hello?")
    assert result.exit_code == 1 and "ghost" in result.output
    bad = cli("chat", "Mira", "--review", "critic:", "--once", "Hello?")
    assert bad.exit_code == 2 and "PROFILE:MODEL" in bad.output
    assert server.bodies == []


def test_profile_review_preset_and_randomize_commands(home: Path, server: ThreadServer) -> None:
    added = cli("profile", "add", "critic", "-m", "judge", "--review", "off", "--preset", "cool")
    assert added.exit_code == 0, added.output
    assert cli("profile", "review", "scripted", "critic:judge-2").exit_code == 0
    assert cli("profile", "fallback", "scripted", "add", "critic").exit_code == 0
    toggled = cli("profile", "fallback", "scripted", "randomize")
    assert toggled.exit_code == 0 and "randomized" in toggled.output
    listed = cli("profile", "list").output
    assert "review: critic:judge-2" in listed and "(randomized)" in listed
    assert "preset: cool" in listed and "review: off" in listed
    assert cli("profile", "fallback", "scripted", "ordered").exit_code == 0
    assert "(randomized)" not in cli("profile", "list").output
    missing = cli("profile", "review", "scripted", "ghost")
    assert missing.exit_code == 1 and "ghost" in missing.output
