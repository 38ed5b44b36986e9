"""Commands that wait for the user: /input, /popup, /buttons and /echo awaitDismissal, with a
host that answers (a scripted asker), and headless (no asker)."""

from __future__ import annotations

import asyncio
from typing import Any

from tavernkit.stscript import (
    Answer,
    Budget,
    Question,
    ScriptHost,
    ScriptRunner,
    default_registry,
    run_script,
)


class Scripted:
    """An asker that answers each question with the next of ``answers``, keeping them."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.asked: list[Question] = []

    async def __call__(self, question: Question) -> Answer:
        self.asked.append(question)
        return self.answers.pop(0)


def run(text: str, asker: Scripted | None = None) -> tuple[Any, ScriptHost]:
    host = ScriptHost(user_name="Ann", char_name="Bo", asker=asker)
    result = asyncio.run(run_script(text, host))
    assert result is not None
    return result.pipe, host


# -- /input ----------------------------------------------------------------------------------


def test_input_returns_the_typed_text_and_asks_with_its_options() -> None:
    asker = Scripted(Answer("ok", "Ada"))
    pipe, _ = run(
        "/input default=Bob okButton=Go rows=2 large=true Your name? | /echo Hi {{pipe}}", asker
    )
    assert pipe == "Hi Ada"
    (question,) = asker.asked
    assert question == Question(
        "input", "Your name?", default="Bob", ok_button="Go", large=True, rows=2
    )


def test_input_cancelled_returns_an_empty_string() -> None:
    assert run("/input Name? | /pass [{{pipe}}]", Scripted(Answer("cancel")))[0] == "[]"
    assert run("/prompt Name? | /pass [{{pipe}}]", Scripted(Answer(None)))[0] == "[]"


def test_input_with_no_one_to_ask_returns_its_default() -> None:
    assert run("/input default=Bob Name?")[0] == "Bob"
    assert run("/input Name? | /pass [{{pipe}}]")[0] == "[]"


def test_input_runs_on_success_with_the_text_and_on_cancel_with_nothing() -> None:
    script = (
        "/input onSuccess={: /setvar key=got {{pipe}} :} "
        'onCancel={: /setvar key=got "cancelled" :} Name?'
    )
    pipe, host = run(script, Scripted(Answer("ok", "Ada")))
    assert pipe == "Ada" and host.variables.get("got") == "Ada"
    pipe, host = run(script, Scripted(Answer("cancel")))
    assert pipe == "" and host.variables.get("got") == "cancelled"
    # headless: the untouched box is accepted
    _, host = run("/input default=Bob onSuccess={: /setvar key=got {{pipe}} :} Name?")
    assert host.variables.get("got") == "Bob"


def test_the_users_thinking_time_is_not_the_scripts_time() -> None:
    clock = [0.0]

    async def slow(question: Question) -> Answer:
        clock[0] += 120.0  # two minutes at the dialog
        return Answer("ok", "x")

    host = ScriptHost(asker=slow)
    runner = ScriptRunner(
        host, default_registry(), budget=Budget(max_seconds=60), monotonic=lambda: clock[0]
    )
    result = asyncio.run(runner.run("/input a | /input b | /pass done"))
    assert result is not None and result.pipe == "done"


# -- /popup ----------------------------------------------------------------------------------


def test_popup_returns_its_text_whatever_is_pressed() -> None:
    asker = Scripted(Answer("cancel"))
    assert run("/popup okButton=Yes cancelButton=No Go on?", asker)[0] == "Go on?"
    assert asker.asked[0] == Question("popup", "Go on?", ok_button="Yes", cancel_button="No")


def test_popup_header_is_the_heading_above_the_text() -> None:
    asker = Scripted(Answer("ok"))
    assert run('/popup header="Chapter 2" The road forks.', asker)[0] == "The road forks."
    assert asker.asked[0] == Question("popup", "The road forks.", title="Chapter 2")


def test_popup_result_is_the_button_pressed() -> None:
    script = "/popup result=true okButton=Left cancelButton=Right Which way?"
    assert run(script, Scripted(Answer("ok")))[0] == "1"
    assert run(script, Scripted(Answer("cancel")))[0] == "0"
    assert run(script, Scripted(Answer(None)))[0] == ""  # Escape
    assert run(script)[0] == ""  # no one to ask: as if closed
    assert run("/popup Note")[0] == "Note"


# -- /buttons --------------------------------------------------------------------------------


def test_buttons_returns_the_label_chosen() -> None:
    asker = Scripted(Answer("ok", chosen=(1,)))
    assert run('/buttons labels=["Fight","Flee"] What now?', asker)[0] == "Flee"
    assert asker.asked[0] == Question("buttons", "What now?", labels=("Fight", "Flee"))


def test_buttons_cancelled_or_headless_returns_an_empty_string() -> None:
    script = '/buttons labels=["Fight","Flee"] What now? | /pass [{{pipe}}]'
    assert run(script, Scripted(Answer(None)))[0] == "[]"
    assert run(script)[0] == "[]"


def test_buttons_multiple_returns_a_json_array() -> None:
    script = '/buttons multiple=true labels=["a","b","c"] Pick'
    assert run(script, Scripted(Answer("ok", chosen=(0, 2))))[0] == '["a","c"]'
    assert run(script, Scripted(Answer(None)))[0] == "[]"
    assert run(script)[0] == "[]"


def test_buttons_takes_labels_from_a_variable_and_label_objects() -> None:
    script = '/let opts ["x","y"] | /buttons labels=opts Pick'
    assert run(script, Scripted(Answer("ok", chosen=(0,))))[0] == "x"
    script = '/buttons labels=[{"label":"Sword"},{"label":"Bow"}] Pick'
    assert run(script, Scripted(Answer("ok", chosen=(1,))))[0] == "Bow"


def test_buttons_without_labels_asks_nothing() -> None:
    asker = Scripted()
    assert run("/buttons labels=notjson Pick | /pass [{{pipe}}]", asker)[0] == "[]"
    assert asker.asked == []


# -- /echo awaitDismissal --------------------------------------------------------------------


def test_echo_await_dismissal_waits_for_the_user() -> None:
    asker = Scripted(Answer(None))
    pipe, host = run("/echo awaitDismissal=true severity=warning title=T Careful", asker)
    assert pipe == "Careful"
    assert asker.asked == [Question("echo", "Careful", severity="warning", title="T")]
    assert host.toasts == []  # shown as the question, not again afterwards
    # headless: an ordinary toast
    pipe, host = run("/echo awaitDismissal=true Careful")
    assert pipe == "Careful" and [t.message for t in host.toasts] == ["Careful"]
