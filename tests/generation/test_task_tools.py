"""generate_task with tools (native, prompt_xml, prompt_json), tool_choice enforcement,
argument validation, malformed protocol output with corrective retries, and the tool loop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tavernkit import FunctionTool, GenerateTaskError, Tavern

from ._helpers import context, profile, setup_tavern
from ._scripted_server import Reply, ScriptedServer

SEARCH = {
    "type": "function",
    "function": {
        "name": "search_web",
        "description": "Search the web.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "minLength": 1}},
            "required": ["query"],
            "additionalProperties": False,
        },
    },
}
NOTE = {
    "name": "take_note",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
}
ASK = [{"role": "user", "content": "Search: claude release notes."}]
TRIGGER = "<Function_Ab12_Start/>"


def xml_call(name: str, args: Any, trigger: str = TRIGGER) -> str:
    body = args if isinstance(args, str) else json.dumps(args)
    return (
        f"Let me look.\n{trigger}\n<function_calls>\n<function_call>\n  <tool>{name}</tool>\n"
        f"  <args_json><![CDATA[{body}]]></args_json>\n</function_call>\n</function_calls>"
    )


def json_call(name: str, args: Any, trigger: str = TRIGGER) -> str:
    payload = json.dumps({"tool_calls": [{"name": name, "arguments": args}]})
    return f"Looking.\n{trigger}\n```json\n{payload}\n```"


async def run(
    tmp_path: Path,
    replies: list[Reply],
    *,
    tools_ok: bool | None = True,
    source: str = "custom",
    **kw: Any,
) -> tuple[Any, ScriptedServer]:
    async with ScriptedServer(replies) as server:
        base = server.base_url if source == "claude" else server.base_url + "/v1"
        model = "claude-sonnet-4-5" if source == "claude" else "scripted-model"
        tk, _ = await setup_tavern(
            tmp_path, [profile(base, source=source, tools=tools_ok, model=model)]
        )
        try:
            kw.setdefault("tools", [SEARCH, NOTE])
            result = await context(tk).generate_task(ASK, **kw)
        finally:
            await tk.close()
    return result, server


async def test_native_tool_call_parsed_with_raw_id(tmp_path: Path) -> None:
    result, server = await run(
        tmp_path, [Reply(text="", tool_calls=[("search_web", {"query": "x"})])]
    )
    assert [(c.name, c.args, c.id) for c in result.tool_calls] == [
        ("search_web", {"query": "x"}, "call_0")
    ]
    assert result.finish_reason == "tool_calls"
    body = server.requests[0].body
    assert [t["function"]["name"] for t in body["tools"]] == ["search_web", "take_note"]
    assert body["tool_choice"] == "auto"


async def test_native_anthropic_tool_use(tmp_path: Path) -> None:
    result, server = await run(
        tmp_path,
        [Reply(text="ok", tool_calls=[("take_note", {"text": "hi"})])],
        source="claude",
        tool_choice={"type": "function", "function": {"name": "take_note"}},
    )
    assert [(c.name, c.args) for c in result.tool_calls] == [("take_note", {"text": "hi"})]
    assert server.requests[0].body["tool_choice"] == {"type": "tool", "name": "take_note"}


@pytest.mark.parametrize(
    ("reply", "kw", "code"),
    [
        (Reply(text="no call"), {"tool_choice": "required"}, "tool_call_missing"),
        (
            Reply(text="x", tool_calls=[("take_note", {"text": "a"})]),
            {"tool_choice": {"type": "function", "function": {"name": "search_web"}}},
            "tool_call_missing",
        ),
        (
            Reply(text="x"),
            {"function_call_options": {"required_function_name": "take_note"}},
            "tool_call_missing",
        ),
        (
            Reply(text="x", tool_calls=[("take_note", {"text": "a"})]),
            {"tool_choice": "none"},
            "tool_call_parse",
        ),
        (Reply(text="", tool_calls=[("search_web", '{"query": ')]), {}, "tool_call_parse"),
        (Reply(text="", tool_calls=[("search_web", {"query": ""})]), {}, "tool_call_parse"),
        (Reply(text="", tool_calls=[("search_web", "[1]")]), {}, "tool_call_parse"),
        (
            Reply(text="x"),
            {"tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "invalid_input",
        ),
    ],
)
async def test_tool_choice_and_arguments_enforced_natively(
    tmp_path: Path, reply: Reply, kw: dict[str, Any], code: str
) -> None:
    with pytest.raises(GenerateTaskError) as info:
        await run(tmp_path, [reply], **kw)
    assert info.value.code == code
    if code == "tool_call_parse" and "raw_arguments" in info.value.details:
        assert isinstance(info.value.details["raw_arguments"], str)


async def test_invalid_arguments_carry_raw_arguments_and_errors(tmp_path: Path) -> None:
    with pytest.raises(GenerateTaskError) as info:
        await run(tmp_path, [Reply(text="", tool_calls=[("search_web", {"query": "", "x": 1})])])
    details = info.value.details
    assert info.value.code == "tool_call_parse"
    assert json.loads(details["raw_arguments"]) == {"query": "", "x": 1}
    assert {e["path"] for e in details["errors"]} >= {"$", "$.query"}


async def test_explicit_native_on_a_model_without_tools_is_unsupported(tmp_path: Path) -> None:
    with pytest.raises(GenerateTaskError) as info:
        await run(tmp_path, [Reply(text="x")], tools_ok=False, function_call_mode="native")
    assert info.value.code == "unsupported_api"


@pytest.mark.parametrize("mode", ["prompt_xml", "prompt_json", "auto"])
async def test_prompt_protocols_parse_calls(tmp_path: Path, mode: str) -> None:
    write = json_call if mode == "prompt_json" else xml_call
    result, server = await run(
        tmp_path,
        [Reply(text=write("search_web", {"query": "notes"}))],
        tools_ok=mode != "auto",
        function_call_mode=mode,
        function_call_options={"trigger_signal": TRIGGER, "protocol_style": "table"},
    )
    assert [(c.name, c.args) for c in result.tool_calls] == [("search_web", {"query": "notes"})]
    assert result.assistant_text == "Let me look." if mode != "prompt_json" else "Looking."
    body = server.requests[0].body
    assert "tools" not in body
    system = [m["content"] for m in body["messages"] if m["role"] == "system"]
    assert any(TRIGGER in s and "search_web" in s for s in system)


@pytest.mark.parametrize("mode", ["prompt_xml", "prompt_json"])
async def test_malformed_protocol_output_gets_a_corrective_retry(tmp_path: Path, mode: str) -> None:
    write = json_call if mode == "prompt_json" else xml_call
    broken = f"{TRIGGER}\n<function_calls><function_call><tool>search_web</tool>"
    if mode == "prompt_json":
        broken = (
            f'{TRIGGER}\n```json\n{{"tool_calls": [{{"name": "search_web", "arguments": 5}}]}}\n```'
        )
    result, server = await run(
        tmp_path,
        [Reply(text=broken), Reply(text=write("search_web", {"query": "fixed"}))],
        function_call_mode=mode,
        function_call_options={"trigger_signal": TRIGGER},
    )
    assert [c.args for c in result.tool_calls] == [{"query": "fixed"}]
    retry = server.requests[1].body["messages"]
    assert retry[-2] == {"role": "assistant", "content": broken}
    assert "failed parsing/validation" in retry[-1]["content"]
    assert TRIGGER in retry[-1]["content"]


async def test_malformed_output_beyond_retries_is_tool_call_parse(tmp_path: Path) -> None:
    bad = xml_call("search_web", "{not json")
    with pytest.raises(GenerateTaskError) as info:
        await run(
            tmp_path,
            [Reply(text=bad)],
            function_call_mode="prompt_xml",
            function_call_options={"trigger_signal": TRIGGER, "max_retries": 1},
        )
    assert info.value.code == "tool_call_parse"
    assert info.value.details["attempts"] == 2


async def test_prompt_mode_required_call_missing(tmp_path: Path) -> None:
    with pytest.raises(GenerateTaskError) as info:
        await run(
            tmp_path,
            [Reply(text="I'd rather chat.")],
            function_call_mode="prompt_xml",
            tool_choice="required",
            function_call_options={"trigger_signal": TRIGGER, "max_retries": 0},
        )
    assert info.value.code == "tool_call_missing"


async def test_prompt_mode_plain_text_answer_without_trigger(tmp_path: Path) -> None:
    result, _ = await run(
        tmp_path,
        [Reply(text="Nothing to search.")],
        function_call_mode="prompt_xml",
        function_call_options={"trigger_signal": TRIGGER},
    )
    assert (result.assistant_text, result.tool_calls) == ("Nothing to search.", [])


async def test_tool_history_survives_the_prompt_xml_rewrite(tmp_path: Path) -> None:
    history = [
        *ASK,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "search_web", "arguments": '{"query": "a"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "RESULT-42"},
    ]
    async with ScriptedServer([Reply(text="The answer is 42.")]) as server:
        tk, _ = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")])
        try:
            result = await context(tk).generate_task(
                history,
                tools=[SEARCH],
                function_call_mode="prompt_xml",
                function_call_options={"trigger_signal": TRIGGER},
            )
        finally:
            await tk.close()
    sent = server.requests[0].body["messages"]
    assert result.assistant_text == "The answer is 42."
    assert all(m["role"] != "tool" and "tool_calls" not in m for m in sent)
    text = json.dumps(sent)
    assert "RESULT-42" in text and "<tool_result>" in text and "search_web" in text


async def test_run_tool_loop_until_text(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    def search(args: dict[str, Any]) -> dict[str, Any]:
        seen.append(args)
        return {"hits": [args["query"].upper()]}

    replies = [
        Reply(text="", tool_calls=[("search_web", {"query": "one"})]),
        Reply(text="", tool_calls=[("search_web", {"query": "two"})]),
        Reply(text="Done: ONE, TWO."),
    ]
    async with ScriptedServer(replies) as server:
        tk, _ = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")])
        try:
            loop = await context(tk).run_tool_loop(ASK, [SEARCH], {"search_web": search})
        finally:
            await tk.close()
    assert loop.text == "Done: ONE, TWO." and loop.stop_reason == "text"
    assert seen == [{"query": "one"}, {"query": "two"}]
    last = server.requests[2].body["messages"]
    assert [m["role"] for m in last[-4:]] == ["assistant", "tool", "assistant", "tool"]
    assert last[-1]["content"] == '{"hits": ["TWO"]}'


async def test_registry_belongs_to_the_tavern(tmp_path: Path) -> None:
    async with (
        Tavern(tmp_path / "a", load_plugins=False) as one,
        Tavern(tmp_path / "b", load_plugins=False) as two,
    ):
        one.context().register_function_tool(FunctionTool("ping", action=lambda a: "pong"))
        assert "ping" in one.tools and "ping" not in two.tools
        assert one.context().unregister_function_tool("ping")
        assert not one.context().unregister_function_tool("ping")
