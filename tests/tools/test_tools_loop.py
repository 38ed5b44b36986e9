"""The tool loop over a scripted generate()."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from tavernkit.errors import GenerateTaskError
from tavernkit.models.chat import ToolInvocation
from tavernkit.tools import (
    FunctionTool,
    ToolCall,
    execute_tool_calls,
    result_text,
    run_tool_loop,
)

PARAMS = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def openai_call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


class Script:
    """A fake model: one scripted (text, calls) per round; records what it was sent."""

    def __init__(self, *rounds: tuple[str, Sequence[Any]]) -> None:
        self.rounds = list(rounds)
        self.seen: list[list[dict[str, Any]]] = []

    async def __call__(self, messages: list[dict[str, Any]]) -> tuple[str, Sequence[Any]]:
        self.seen.append(messages)
        return self.rounds.pop(0)


def counting_tool(name: str = "search", **kw: Any) -> tuple[FunctionTool, list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []

    async def action(args: dict[str, Any]) -> Any:
        calls.append(args)
        return {"hits": [args["q"]]}

    return FunctionTool(name=name, parameters=PARAMS, action=action, **kw), calls


async def test_one_round_then_text() -> None:
    tool, calls = counting_tool(
        display_name="Search", format_message=lambda a: f"Searching for {a['q']}"
    )
    model = Script(
        ("Let me look.", [openai_call("c1", "search", {"q": "cats"})]), ("Cats are great.", [])
    )
    res = await run_tool_loop([{"role": "user", "content": "cats?"}], model, [tool])
    assert res.text == "Cats are great."
    assert res.stop_reason == "text" and res.rounds == 1
    assert calls == [{"q": "cats"}]
    (rec,) = res.invocations
    assert (rec.id, rec.name, rec.display_name, rec.error) == ("c1", "search", "Search", False)
    assert rec.result == '{"hits": ["cats"]}'
    assert rec.display_text == "Searching for cats"
    assert json.loads(rec.parameters) == {"q": "cats"}
    # what the model saw in round 2: its call and the tool result
    second = model.seen[1]
    assert second[1]["role"] == "assistant" and second[1]["tool_calls"][0]["id"] == "c1"
    assert second[2] == {"role": "tool", "tool_call_id": "c1", "content": rec.result}
    assert res.round_texts == ("Let me look.", "Cats are great.")


async def test_string_results_as_is_and_sync_actions() -> None:
    tool = FunctionTool(name="echo", parameters=PARAMS, action=lambda a: f"echo {a['q']}")
    model = Script(("", [ToolCall("echo", {"q": "hi"})]), ("done", []))
    res = await run_tool_loop([], model, [tool])
    assert res.invocations[0].result == "echo hi"
    assert res.invocations[0].id == "call_1_0"  # a missing provider id gets a stable one
    assert result_text({"é": 1}) == '{"é": 1}'
    assert result_text(None) == "null"
    assert result_text({"when": object}).startswith('{"when": "<class')


async def test_errors_go_back_to_the_model() -> None:
    def broken(args: dict[str, Any]) -> str:
        raise RuntimeError("disk full")

    async def slow(args: dict[str, Any]) -> str:
        await asyncio.sleep(5)
        return "late"

    tools = [
        FunctionTool(name="broken", parameters=PARAMS, action=broken),
        FunctionTool(name="slow", parameters=PARAMS, action=slow),
        FunctionTool(name="nohandler", parameters=PARAMS),
        FunctionTool(name="ok", parameters=PARAMS, action=lambda a: "fine"),
    ]
    model = Script(
        (
            "",
            [
                ToolCall("broken", {"q": "x"}),
                ToolCall("slow", {"q": "x"}),
                ToolCall("nohandler", {"q": "x"}),
                ToolCall("ghost", {}),
                ToolCall("ok", {"wrong": 1}),
                ToolCall("ok", {"q": "x"}),
            ],
        ),
        ("recovered", []),
    )
    res = await run_tool_loop([], model, tools, timeout=0.05)
    results = [(r.name, r.error, r.result) for r in res.invocations]
    assert results[0] == ("broken", True, "Error: RuntimeError: disk full")
    assert results[1][:2] == ("slow", True) and "timed out after 0.05 s" in results[1][2]
    assert results[2] == ("nohandler", True, "Error: tool 'nohandler' has no handler")
    assert results[3] == ("ghost", True, "Error: unknown tool 'ghost'")
    assert results[4][:2] == ("ok", True) and "do not match the schema" in results[4][2]
    assert results[5] == ("ok", False, "fine")
    assert res.text == "recovered"
    tool_msgs = [m for m in model.seen[1] if m["role"] == "tool"]
    assert len(tool_msgs) == 6


async def test_max_rounds_without_and_with_final_generate() -> None:
    tool, calls = counting_tool()
    forever = [("again", [ToolCall("search", {"q": str(i)})]) for i in range(10)]
    res = await run_tool_loop([], Script(*forever), [tool])
    assert res.stop_reason == "max_rounds" and res.rounds == 5 and len(calls) == 5
    assert res.text == "again"

    finals: list[list[dict[str, Any]]] = []

    async def final(messages: list[dict[str, Any]]) -> str:
        finals.append(messages)
        return "summary"

    res2 = await run_tool_loop([], Script(*forever), [tool], max_rounds=2, final_generate=final)
    assert res2.text == "summary" and res2.rounds == 2
    assert finals[0][-1]["role"] == "tool"
    with pytest.raises(GenerateTaskError):
        await run_tool_loop([], Script(), [tool], max_rounds=0)


async def test_stealth_ends_the_loop_and_stays_hidden() -> None:
    tool, _ = counting_tool()
    hidden, hidden_calls = counting_tool("bookkeep", stealth=True)
    model = Script(
        ("", [ToolCall("search", {"q": "a"}, id="v"), ToolCall("bookkeep", {"q": "b"}, id="s")])
    )
    res = await run_tool_loop([{"role": "user", "content": "u"}], model, [tool, hidden])
    assert res.stop_reason == "stealth" and res.rounds == 1
    assert hidden_calls == [{"q": "b"}]
    assert [r.stealth for r in res.invocations] == [False, True]
    assert all(m.get("tool_call_id") != "s" for m in res.messages)
    assert len(model.seen) == 1  # no follow-up generation
    inv = res.invocations[1].to_tool_invocation()
    assert isinstance(inv, ToolInvocation) and inv.to_wire()["stealth"] is True


async def test_identical_calls_run_once_per_request() -> None:
    tool, calls = counting_tool()
    same = {"q": "cats"}
    model = Script(
        # asked twice in one reply (different ids): runs twice
        ("", [openai_call("a", "search", same), openai_call("b", "search", same)]),
        # the same call reported twice (same id and identity), as a stream may: runs once
        ("", [openai_call("c", "search", same), openai_call("c", "search", same)]),
        # asked again in a later round: runs again
        ("", [ToolCall("search", {"q": "cats"})]),
        ("end", []),
    )
    res = await run_tool_loop([], model, [tool])
    assert len(calls) == 4
    assert len({r.identity for r in res.invocations}) == 1
    assert [r.id for r in res.invocations] == ["a", "b", "c", "call_3_0"]


async def test_abort_between_rounds_and_calls() -> None:
    tool, calls = counting_tool()
    abort = asyncio.Event()

    async def gen(messages: list[dict[str, Any]]) -> tuple[str, Sequence[Any]]:
        abort.set()
        return "", [ToolCall("search", {"q": "x"})]

    with pytest.raises(GenerateTaskError) as info:
        await run_tool_loop([], gen, [tool], abort=abort)
    assert info.value.code == "aborted"
    assert calls == []  # the abort came before the tool ran
    abort.clear()
    records = await execute_tool_calls(
        [ToolCall("search", {"q": "y"})], {"search": tool}, abort=abort
    )
    assert records[0].result == '{"hits": ["y"]}' and records[0].round == 1


async def test_generate_failure_propagates() -> None:
    async def gen(messages: list[dict[str, Any]]) -> tuple[str, Sequence[Any]]:
        raise GenerateTaskError("network", "down")

    with pytest.raises(GenerateTaskError) as info:
        await run_tool_loop([], gen, [])
    assert info.value.code == "network"


async def test_invocation_record_to_chat_model() -> None:
    tool, _ = counting_tool(display_name="Search")
    records = await execute_tool_calls([openai_call("id1", "search", {"q": "z"})], [tool])
    wire = records[0].to_tool_invocation().to_wire()
    assert wire == {
        "id": "id1",
        "displayName": "Search",
        "name": "search",
        "parameters": '{"q": "z"}',
        "result": '{"hits": ["z"]}',
        "error": False,
    }
