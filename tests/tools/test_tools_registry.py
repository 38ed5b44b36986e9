"""FunctionTool and ToolRegistry."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tavernkit.errors import GenerateTaskError
from tavernkit.tools import FunctionTool, ToolRegistry, check_tool_name, tools_from_specs


def tool(name: str = "search_web", **kw: object) -> FunctionTool:
    return FunctionTool(name=name, description="d", **kw)  # type: ignore[arg-type]


@given(st.from_regex(r"[a-zA-Z0-9_-]{1,64}", fullmatch=True))
def test_valid_names(name: str) -> None:
    assert check_tool_name(name) == name


@pytest.mark.parametrize("name", ["", "a" * 65, "has space", "dot.ted", "ünï", None, 3, "a\n"])
def test_invalid_names(name: object) -> None:
    with pytest.raises(GenerateTaskError) as info:
        check_tool_name(name)
    assert info.value.code == "invalid_input"
    assert info.value.details["field"] == "name"


def test_register_unregister_and_duplicates() -> None:
    reg = ToolRegistry()
    reg.register_function_tool(tool())
    assert "search_web" in reg and len(reg) == 1
    with pytest.raises(GenerateTaskError, match="already registered"):
        reg.register_function_tool(tool())
    replacement = FunctionTool(name="search_web", description="new")
    reg.register_function_tool(replacement, replace=True)
    assert reg.get("search_web") is replacement
    assert reg.unregister_function_tool("search_web") is True
    assert reg.unregister_function_tool("search_web") is False
    assert reg.names() == []


def test_registries_are_per_instance() -> None:
    a, b = ToolRegistry(), ToolRegistry()
    a.register_function_tool(tool())
    assert "search_web" not in b


async def test_should_register_sync_and_async_is_asked_each_time() -> None:
    state = {"on": True}
    calls = {"n": 0}

    async def gate() -> bool:
        calls["n"] += 1
        return state["on"]

    reg = ToolRegistry(
        [
            tool("always"),
            tool("sync_gate", should_register=lambda: state["on"]),
            tool("async_gate", should_register=gate),
        ]
    )
    assert [t.name for t in await reg.tools("normal")] == ["always", "sync_gate", "async_gate"]
    state["on"] = False
    assert [t.name for t in await reg.tools("normal")] == ["always"]
    assert calls["n"] == 2


async def test_a_should_register_that_raises_leaves_only_that_tool_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> bool:
        raise RuntimeError("secret-ish detail")

    async def broken_async() -> bool:
        raise KeyError("x")

    reg = ToolRegistry(
        [
            tool("ok"),
            tool("bad", should_register=broken),
            tool("bad2", should_register=broken_async),
        ]
    )
    with caplog.at_level("WARNING", logger="tavernkit.tools"):
        assert [t.name for t in await reg.tools("normal")] == ["ok"]
    assert [r.getMessage() for r in caplog.records] == [
        "tool bad: should_register failed (RuntimeError); left out",
        "tool bad2: should_register failed (KeyError); left out",
    ]
    assert "secret-ish" not in caplog.text


def test_format_message_and_display_name() -> None:
    plain = tool()
    assert plain.message_for({}) == "Invoking tool: search_web"
    named = tool(display_name="Web Search", format_message=lambda a: f"Searching {a['q']}")
    assert named.label == "Web Search"
    assert named.message_for({"q": "cats"}) == "Searching cats"
    # a formatter that fails falls back to the default text
    assert named.message_for({}) == "Invoking tool: Web Search"


def test_to_openai() -> None:
    t = FunctionTool(
        name="f", description="does f", parameters={"type": "object", "properties": {}}
    )
    assert t.to_openai() == {
        "type": "function",
        "function": {
            "name": "f",
            "description": "does f",
            "parameters": {"type": "object", "properties": {}},
        },
    }


def test_parameters_must_be_an_object() -> None:
    with pytest.raises(GenerateTaskError, match="parameters"):
        FunctionTool(name="f", parameters=["x"])  # type: ignore[arg-type]


def test_tools_from_specs() -> None:
    def handler(args: dict) -> str:
        return "ok"

    specs = [
        {
            "type": "function",
            "function": {"name": "a", "description": "A", "parameters": {"type": "object"}},
        },
        {"name": "b"},
        FunctionTool(name="c"),
    ]
    tools = tools_from_specs(specs, {"a": handler})
    assert [t.name for t in tools] == ["a", "b", "c"]
    assert tools[0].action is handler and tools[1].action is None
    assert tools[1].parameters == {"type": "object", "properties": {}}
    with pytest.raises(GenerateTaskError, match="duplicate"):
        tools_from_specs([{"name": "a"}, {"name": "a"}])
    for bad in (
        [{"function": "x"}],
        [{"name": "bad name"}],
        ["str"],
        [{"name": "a", "description": 3}],
    ):
        with pytest.raises(GenerateTaskError) as info:
            tools_from_specs(bad)  # type: ignore[arg-type]
        assert info.value.code == "invalid_input"
