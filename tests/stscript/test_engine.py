"""The STscript engine beyond the goldens: budgets, errors instead of tracebacks, plugin
commands, quick-reply sets in SillyTavern's JSON and the bounded regexes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import pytest

from tavernkit.errors import PluginError, ScriptBudgetExceeded, ScriptError
from tavernkit.models.quick_reply import QuickReplySet
from tavernkit.plugins import get_plugin_manager, hookimpl
from tavernkit.plugins.script_commands import plugin_script_commands
from tavernkit.stscript import (
    Budget,
    CommandCall,
    GenerationRequest,
    ScriptHost,
    ScriptRunner,
    click_text,
    default_registry,
    parse_script,
    run_script,
)


def run(text: str, host: ScriptHost | None = None, **options: Any) -> Any:
    result = asyncio.run(
        run_script(text, host or ScriptHost(user_name="Ann", char_name="Bo"), **options)
    )
    return None if result is None else result.pipe


def test_an_empty_script_returns_nothing() -> None:
    assert run("") is None


def test_pipes_closures_and_scopes() -> None:
    assert run("/let x 2 | /let f {: n=3 /mul {{var::x}} {{var::n}} :} | /:f n=5") == "10"
    assert run("/pass a || /pass [{{pipe}}]") == "[a]"
    assert run("/pass 5 || /add") == "0"  # || keeps the pipe out of the next command


def test_a_loop_without_guard_stops_at_the_step_budget() -> None:
    with pytest.raises(ScriptBudgetExceeded) as caught:
        run("/while guard=off left=1 right=1 {: /pass x :}", budget=Budget(max_steps=500))
    assert caught.value.budget == "steps"
    assert caught.value.name == "ScriptBudgetExceeded"


def test_the_time_budget_uses_the_injected_clock() -> None:
    ticks = iter(range(0, 10_000, 5))
    host = ScriptHost()
    runner = ScriptRunner(
        host, default_registry(), budget=Budget(max_seconds=20), monotonic=lambda: next(ticks)
    )
    with pytest.raises(ScriptBudgetExceeded) as caught:
        asyncio.run(runner.run("/times guard=off 1000 {: /pass x :}"))
    assert caught.value.budget == "seconds"


def test_recursion_stops_at_the_depth_budget() -> None:
    with pytest.raises(ScriptBudgetExceeded) as caught:
        run("/let f {: /:f :} | /:f", budget=Budget(max_depth=50))
    assert caught.value.budget == "depth"


def test_delay_never_sleeps_past_the_deadline() -> None:
    slept: list[float] = []

    async def sleeper(seconds: float) -> None:
        slept.append(seconds)

    clock = iter([0.0, 0.0, 1.0, 1.0, 1.0])
    runner = ScriptRunner(
        ScriptHost(),
        default_registry(),
        budget=Budget(max_seconds=3),
        monotonic=lambda: next(clock),
        sleeper=sleeper,
    )
    asyncio.run(runner.run("/delay 60000"))
    assert slept == [2.0]


def test_errors_carry_sillytaverns_messages_and_positions() -> None:
    with pytest.raises(ScriptError) as caught:
        run("/pass ok |\n/nosuch x")
    assert caught.value.name == "SlashCommandParserError"
    assert caught.value.message == 'Unknown command at position 13: "/nosuch"'
    assert (caught.value.line, caught.value.column) == (1, 2)
    assert caught.value.hint.endswith("^^^^^")
    with pytest.raises(ScriptError) as caught:
        run("/let x 1 | /let x 2")
    assert caught.value.name == "SlashCommandExecutionError"
    assert caught.value.message == 'Variable named "x" already exists.'


def test_a_broken_command_is_an_error_not_a_traceback() -> None:
    registry = default_registry()

    def broken(call: CommandCall) -> str:
        return {}["missing"]  # type: ignore[no-any-return]

    registry.register("broken", broken)
    with pytest.raises(ScriptError) as caught:
        run("/pass a | /broken", registry=registry)
    assert caught.value.name == "SlashCommandExecutionError"
    assert caught.value.column == 11


def test_registered_commands_get_their_arguments() -> None:
    registry = default_registry()

    async def greet(call: CommandCall) -> str:
        return f"{call.text('greeting', 'Hi')}, {call.value_text()}!"

    registry.register("greet", greet, named_args=("greeting",))
    assert run("/greet greeting=Hello {{user}}", registry=registry) == "Hello, Ann!"
    assert run("/pass Bo | /greet", registry=registry) == "Hi, Bo!"


class Dice:
    @hookimpl
    def register_script_commands(self, register: Any) -> None:
        register("d6", lambda call: 4, help="a fair roll")


class Thief:
    @hookimpl
    def register_script_commands(self, register: Any) -> None:
        register("echo", lambda call: "stolen")


def test_plugins_add_commands_but_cannot_replace_built_ins() -> None:
    pm = get_plugin_manager(load_entrypoints=False)
    assert plugin_script_commands(pm) is None  # no plugin adds any: the built-ins are used
    pm.register(Dice())
    registry = plugin_script_commands(pm)
    assert registry is not None
    assert run("/d6 | /mul {{pipe}} 2", registry=registry) == "8"
    pm.register(Thief())
    with pytest.raises(PluginError, match="/echo is taken"):
        plugin_script_commands(pm)


def test_a_hostile_pattern_on_a_long_input_is_refused() -> None:
    with pytest.raises(ScriptError, match="backtrack"):
        run("/test pattern=/(a+)+$/ " + "a" * 5000 + "b")
    assert run("/test pattern=/(a+)+$/ aaab") == "false"


def test_quick_reply_sets_round_trip_in_sillytaverns_json() -> None:
    exported = {
        "version": 2,
        "name": "Kit",
        "disableSend": True,
        "placeBeforeInput": False,
        "injectInput": True,
        "color": "rgba(0, 0, 0, 0)",
        "onlyBorderColor": False,
        "qrList": [
            {
                "id": 4,
                "icon": "fa-dice",
                "showLabel": True,
                "label": "Roll",
                "title": "",
                "message": "/pass {{roll::1d6}}",
                "contextList": [{"set": "Other", "isChained": True}],
                "preventAutoExecute": True,
                "isHidden": False,
                "executeOnStartup": False,
                "executeOnUser": False,
                "executeOnAi": False,
                "executeOnChatChange": False,
                "executeOnGroupMemberDraft": False,
                "executeOnNewChat": False,
                "executeBeforeGeneration": False,
                "automationId": "",
                "futureField": 1,
            }
        ],
        "idIndex": 4,
    }
    text = json.dumps(exported, separators=(",", ":"))
    qr_set = QuickReplySet.model_validate(json.loads(text))
    assert qr_set.export_text() == text
    added = qr_set.add(label="Next", message="hi")
    assert (added.id, qr_set.id_index) == (6, 6)
    assert added.st_json()["preventAutoExecute"] is True


def test_a_button_joins_the_typed_text_as_the_set_says() -> None:
    qr_set = QuickReplySet.create(name="S", inject_input=True)
    reply = qr_set.add(label="Go", message="/echo hi")
    assert click_text(qr_set, reply, "typed") == "typed /echo hi"
    qr_set.place_before_input = True
    assert click_text(qr_set, reply, "typed") == "/echo hi typed"
    assert click_text(qr_set, reply, "") == "/echo hi "


def test_a_text_reply_is_sent_and_a_nosend_one_stays_in_the_input_box() -> None:
    asked: list[GenerationRequest] = []

    async def generator(request: GenerationRequest, host: ScriptHost) -> str:
        asked.append(request)
        host.input_text = ""
        return ""

    host = ScriptHost(user_name="Ann", char_name="Bo", generator=generator)
    run("/qr-set-create S | /qr-create set=S label=Hi Hello {{char}}! | /run S.Hi", host)
    assert [(r.kind, r.prompt) for r in asked] == [("send", "Hello Bo! ")]
    run("/qr-set-update nosend=true S | /run S.Hi", host)
    assert host.input_text == "Hello Bo! "
    assert len(asked) == 1


@pytest.mark.parametrize(
    "text",
    [
        '/pass "' + " " * 100_000 + '"',
        "/pass " + "\\" * 100_000 + "|",
        "/pass " + "{{" * 50_000,
        "// " + " " * 100_000 + "| /pass x",
    ],
    ids=["spaces-in-quotes", "backslashes", "open-macros", "spaces-in-comment"],
)
def test_hostile_texts_parse_in_linear_time(text: str) -> None:
    started = time.perf_counter()
    with contextlib.suppress(ScriptError):
        parse_script(text, default_registry().get)
    assert time.perf_counter() - started < 5


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    with pytest.raises(ScriptError, match="nested deeper than 100"):
        run("/pass " + "{: /pass " * 150 + ":} " * 150)
    with pytest.raises(ScriptBudgetExceeded):
        run("/let f {: /if left=1 {: /:f :} :} | /:f")
