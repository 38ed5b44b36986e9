"""``tavernkit chat`` asks a script's questions on the terminal: ``/input`` reads a line
(Enter alone keeps ``default=``), ``/buttons`` and ``/popup`` list their buttons by number (a
number out of range is asked again), end of input is Cancel."""

from __future__ import annotations

from pathlib import Path

from cli.test_chat_cli import cli, home, messages, server

__all__ = ["home", "server"]  # fixtures used here


def test_a_script_asks_on_the_terminal(home: Path) -> None:
    lines = [
        "/input default=Bo Your name? | /sendas name=Mira Hello {{pipe}}",
        "Ada",
        '/buttons labels=["Fight","Flee"] What now? | /sendas name=Mira You {{pipe}}',
        "3",
        "2",
        "/popup result=true okButton=Yes cancelButton=No Sure?",
        "2",
        "/input default=Bo Name? | /sendas name=Mira Hi {{pipe}}",
        "",
        "/quit",
    ]
    result = cli("chat", "Mira", input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    assert "Your name?" in result.stdout and "Enter keeps: Bo" in result.stdout
    assert "1. Fight" in result.stdout and "2. Flee" in result.stdout
    assert "no choice 3: a number from 1 to 2" in result.stderr
    assert "1. Yes" in result.stdout and "2. No" in result.stdout
    assert "→ 0" in result.stdout  # /popup result=true: the second button
    texts = [m.mes for m in messages(home)]
    assert texts[-3:] == ["Hello Ada", "You Flee", "Hi Bo"]


def test_end_of_input_cancels_the_question(home: Path) -> None:
    script = "/input default=Bo Name? | /setvar key=got [{{pipe}}] | /getvar got\n"
    result = cli("chat", "Mira", input=script)
    assert result.exit_code == 0, result.output
    assert "→ []" in result.stdout  # cancelled: '' (not the default)
