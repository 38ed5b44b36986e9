"""MCP servers as tool sources, against a real MCP server (tests/tools/_mcp_server.py) started
over stdio as a subprocess and served over streamable HTTP on loopback, with the model played
by the scripted OpenAI-compatible server: registrations as owned records, tools offered to
chat turns and ``generate_task``, the tool loop, argument validation, replay by identity,
per-tool disabling, and credentials loaded only for the registration's owner."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from generation._scripted_server import Reply, ScriptedServer
from tavernkit.errors import GenerateTaskError, ToolSourceError, ToolSourceUnavailable
from tavernkit.facade import Tavern
from tavernkit.models.chat import Message
from tavernkit.models.mcp import McpServer
from tavernkit.models.profile import (
    CapabilityOverrides,
    ConnectionProfile,
    CredentialRef,
    FallbackChain,
    FallbackEntry,
)
from tavernkit.models.settings import Settings
from tavernkit.providers.retry import RetryPolicy

from ._mcp_server import serve_http

SERVER_SCRIPT = str(Path(__file__).with_name("_mcp_server.py"))
CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {"name": "Mira", "description": "Mira keeps the ferry.", "first_mes": "Evening."},
}


def stdio(name: str = "calc", **fields: Any) -> McpServer:
    return McpServer(
        name=name, transport="stdio", command=sys.executable, args=[SERVER_SCRIPT], **fields
    )


@pytest.fixture
async def model() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as server:
        yield server


async def _tavern(home: Path, model: ScriptedServer, *, owner: str = "default") -> Tavern:
    tk = await Tavern(home, owner=owner, load_plugins=False).open()
    await tk.library.import_bytes(json.dumps(CARD).encode(), source="mira.json")
    for name, fallback in (("scripted", "backup"), ("spare", None)):
        profile = ConnectionProfile(
            name=name,
            api="chat",
            source="openai",
            base_url=model.base_url + "/v1",
            model="m1" if fallback else "m2",
            fallback_chain=fallback,
            capabilities=CapabilityOverrides(supports_tools=True),
        )
        await tk.store.put("connection_profile", profile, owner=owner)
    await tk.store.put(
        "fallback_chain",
        FallbackChain(name="backup", entries=[FallbackEntry(profile="spare")]),
        owner=owner,
    )
    settings = Settings()
    settings.selections.profile = "scripted"
    settings.selections.character = "Mira"
    settings.selections.user_name = "Ada"
    await tk.store.put_settings(settings, owner=owner)
    return tk


def _offered(model: ScriptedServer, n: int = 0) -> list[str]:
    return [t["function"]["name"] for t in model.requests[n].body.get("tools") or ()]


async def test_a_registration_is_an_owned_validated_record(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="stdio MCP server needs a command"):
        McpServer(name="x", transport="stdio")
    with pytest.raises(ValueError, match="http:// or https:// url"):
        McpServer(name="x", transport="http", url="ftp://example.org")
    with pytest.raises(ValueError, match="1-64 characters"):
        McpServer(name=" ", transport="http", url="http://127.0.0.1/mcp")
    spaced = McpServer(name="my tools.v2", transport="http", url="http://127.0.0.1/mcp")
    assert spaced.tool_name("add") == "my_tools_v2__add"
    async with (
        Tavern(tmp_path, load_plugins=False) as alice,
        Tavern(tmp_path, owner="bob", load_plugins=False) as bob,
    ):
        await alice.mcp.add(stdio())
        with pytest.raises(ToolSourceError, match="already registered"):
            await alice.mcp.add(stdio())
        assert [s.name for s in await alice.mcp.registrations()] == ["calc"]
        assert await bob.mcp.registrations() == []
        with pytest.raises(ToolSourceError, match="no such registration"):
            await bob.mcp.function_tools("calc")
        await alice.mcp.remove("calc")
        assert await alice.mcp.registrations() == []


async def test_stdio_tools_run_in_a_chat_turn_with_the_tool_loop(
    tmp_path: Path, model: ScriptedServer
) -> None:
    model.script(
        Reply(tool_calls=[("calc__add", {"a": 2, "b": 3})]),
        Reply(text="Five, then."),
    )
    tk = await _tavern(tmp_path, model)
    try:
        await tk.mcp.add(stdio())
        info = await tk.chats.new_chat("Mira")
        out = await tk.chats.send(info.id, "What is 2 + 3?")
        stored = await tk.chats.load(info.id)
    finally:
        await tk.close()
    assert out.status == "completed", out.error
    assert out.text == "Five, then."
    assert {"calc__add", "calc__shout", "calc__tally", "calc__lint"} <= set(_offered(model))
    add = next(t for t in model.requests[0].body["tools"] if t["function"]["name"] == "calc__add")
    assert add["function"]["parameters"]["required"] == ["a", "b"]
    assert add["function"]["description"] == "Add two integers."
    assert model.requests[1].body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": "5",
    }
    tools_message = Message.model_validate(stored.messages[2].data)
    (invocation,) = tools_message.extra.tool_invocations or []
    assert invocation.to_wire()["name"] == "calc__add" and invocation.to_wire()["result"] == "5"


async def test_bad_arguments_and_failing_tools_go_back_to_the_model(
    tmp_path: Path, model: ScriptedServer
) -> None:
    model.script(
        Reply(tool_calls=[("calc__add", {"a": "two", "b": 3}), ("calc__fail", {"reason": "no"})]),
        Reply(text="Both failed."),
    )
    tk = await _tavern(tmp_path, model)
    try:
        await tk.mcp.add(stdio())
        info = await tk.chats.new_chat("Mira")
        out = await tk.chats.send(info.id, "Try.")
    finally:
        await tk.close()
    assert out.status == "completed", out.error
    bad_args, failed = model.requests[1].body["messages"][-2:]
    # validated against the server's schema before anything was sent to the server
    assert bad_args["role"] == "tool" and "Error" in bad_args["content"]
    assert "a" in bad_args["content"] and "integer" in bad_args["content"]
    assert failed["role"] == "tool" and "refused: no" in failed["content"]


async def test_disabled_tools_and_servers_are_not_offered(
    tmp_path: Path, model: ScriptedServer
) -> None:
    model.script(Reply(text="ok"))
    tk = await _tavern(tmp_path, model)
    try:
        await tk.mcp.add(stdio())
        await tk.mcp.set_tool_enabled("calc", "shout", False)
        info = await tk.chats.new_chat("Mira")
        await tk.chats.send(info.id, "Hi")
        await tk.mcp.set_enabled("calc", False)
        await tk.chats.send(info.id, "Hi again")
        await tk.mcp.set_enabled("calc", True)
        await tk.mcp.set_tool_enabled("calc", "shout", True)
        await tk.chats.send(info.id, "And again")
    finally:
        await tk.close()
    assert "calc__shout" not in _offered(model, 0) and "calc__add" in _offered(model, 0)
    assert _offered(model, 1) == []
    assert "calc__shout" in _offered(model, 2)


async def test_http_tools_with_a_stored_key_in_generate_task_and_the_tool_loop(
    tmp_path: Path, model: ScriptedServer
) -> None:
    model.script(
        Reply(tool_calls=[("web__shout", {"text": "ahoy"})]),
        Reply(text="They said AHOY."),
    )
    async with serve_http(token="mcp-secret-1") as (url, seen):
        tk = await _tavern(tmp_path, model)
        try:
            key = await tk.store.add_api_key("openai", "mcp-secret-1", owner=tk.owner, label="mcp")
            await tk.mcp.add(
                McpServer(
                    name="web", transport="http", url=url, credential=CredentialRef(key_id=key)
                )
            )
            ctx = tk.context(retry=RetryPolicy(max_retries=0))
            tools = await ctx.mcp_tools("web")
            task = [{"role": "user", "content": "Shout ahoy."}]
            loop = await ctx.run_tool_loop(task, tools)
            with pytest.raises(GenerateTaskError) as bad:
                model.script(Reply(tool_calls=[("web__add", {"a": "x"})]))
                await ctx.generate_task(task, tools=tools)
        finally:
            await tk.close()
    assert loop.text == "They said AHOY."
    assert [(r.name, r.result) for r in loop.invocations] == [("web__shout", "AHOY")]
    assert ("shout", {"text": "ahoy"}) in seen.calls
    assert seen.authorizations and set(seen.authorizations) == {"Bearer mcp-secret-1"}
    # the server's own schema checked the model's arguments before any call
    assert bad.value.code == "tool_call_parse" and "web__add" in str(bad.value)
    assert ("add", {"a": "x"}) not in seen.calls


async def test_a_wrong_token_is_a_typed_error_without_the_token(
    tmp_path: Path, model: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    async with serve_http(token="right") as (url, _seen):
        tk = await _tavern(tmp_path, model)
        try:
            key = await tk.store.add_api_key(
                "openai", "wrong-token-xyz", owner=tk.owner, label="mcp"
            )
            await tk.mcp.add(
                McpServer(
                    name="web", transport="http", url=url, credential=CredentialRef(key_id=key)
                )
            )
            with pytest.raises(ToolSourceUnavailable, match="'web'") as failed:
                await tk.context().mcp_tools("web")
            # a chat turn leaves the broken server out and goes on
            model.script(Reply(text="fine"))
            info = await tk.chats.new_chat("Mira")
            out = await tk.chats.send(info.id, "Hi")
        finally:
            await tk.close()
    assert "wrong-token-xyz" not in str(failed.value)
    assert out.status == "completed" and _offered(model) == []
    assert "wrong-token-xyz" not in caplog.text


async def test_another_owners_key_is_never_loaded(tmp_path: Path, model: ScriptedServer) -> None:
    async with serve_http(token="alice-token") as (url, seen):
        alice = await _tavern(tmp_path, model)
        bob = await _tavern(tmp_path, model, owner="bob")
        try:
            alice_key = await alice.store.add_api_key(
                "openai", "alice-token", owner=alice.owner, label="mcp"
            )
            await bob.mcp.add(
                McpServer(
                    name="web",
                    transport="http",
                    url=url,
                    credential=CredentialRef(key_id=alice_key),
                )
            )
            with pytest.raises(ToolSourceError, match="not one of this owner's keys"):
                await bob.context().mcp_tools("web")
        finally:
            await bob.close()
            await alice.close()
    assert seen.authorizations == []  # bob's registration never reached the server


async def test_a_tool_that_ran_is_replayed_by_identity_not_rerun(
    tmp_path: Path, model: ScriptedServer
) -> None:
    model.script(
        Reply(tool_calls=[("web__tally", {})]),
        Reply(text="Counted once. The ferry waits.", break_after=3),  # cut mid-stream
        Reply(tool_calls=[("web__tally", {})]),  # the fallback asks for the same call
        Reply(text="Counted once."),
    )
    async with serve_http() as (url, seen):
        tk = await _tavern(tmp_path, model)
        try:
            await tk.mcp.add(McpServer(name="web", transport="http", url=url))
            info = await tk.chats.new_chat("Mira")
            out = await tk.chats.send(info.id, "Count")
        finally:
            await tk.close()
    assert out.status == "completed", out.error
    assert [name for name, _ in seen.calls] == ["tally"]  # ran once
    assert out.result is not None and out.result.counters.replayed_tools == 1
    assert model.requests[3].body["messages"][-1]["content"] == "1"


async def test_a_stdio_server_gets_its_credential_in_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_MCP_TOKEN", "stdio-secret-7")
    async with Tavern(tmp_path, load_plugins=False) as tk:
        await tk.mcp.add(
            stdio(credential=CredentialRef(env="MY_MCP_TOKEN"), credential_env="MCP_TEST_TOKEN")
        )
        (whoami,) = [t for t in await tk.context().mcp_tools() if t.name == "calc__whoami"]
        assert whoami.action is not None
        assert await whoami.action({}) == "stdio-secret-7"
        await tk.mcp.add(stdio(name="bare"))
        (bare,) = [t for t in await tk.context().mcp_tools("bare") if t.name == "bare__whoami"]
        assert bare.action is not None
        # the secret is not inherited by another server: the environment is minimal
        assert await bare.action({}) == "<none>"


async def test_a_server_that_cannot_start_is_a_typed_error(tmp_path: Path) -> None:
    async with Tavern(tmp_path, load_plugins=False) as tk:
        await tk.mcp.add(McpServer(name="ghost", transport="stdio", command="/nonexistent/mcp"))
        with pytest.raises(ToolSourceUnavailable, match="'ghost': could not connect"):
            await tk.context().mcp_tools("ghost")
        assert await tk.context().mcp_tools() == []


def test_the_mcp_cli_registers_lists_switches_and_removes(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tavernkit.cli import app

    runner = CliRunner()
    home = ["--home", str(tmp_path)]

    def run(command: str, *args: str) -> str:
        result = runner.invoke(app, ["mcp", command, *home, *args])
        assert result.exit_code == 0, result.output
        return result.output

    assert "registered MCP server calc (stdio)" in run(
        "add", "calc", "--key-env", "NOT_SET_ANYWHERE", "--", sys.executable, SERVER_SCRIPT
    )
    listed = run("list")
    assert "calc" in listed and "stdio" in listed and "tools" in listed
    run("disable", "calc", "shout")
    # the credential names an unset variable: connecting is a one-line typed error
    failed = runner.invoke(app, ["mcp", "tools", *home, "calc"])
    assert failed.exit_code == 1 and "NOT_SET_ANYWHERE" in failed.output
    run("add", "calc", "--replace", "--", sys.executable, SERVER_SCRIPT)
    run("disable", "calc", "shout")
    offered = run("tools", "calc")
    assert "calc__add" in offered and "calc__shout" not in offered
    run("remove", "calc")
    assert "no MCP servers" in run("list")
    bad = runner.invoke(app, ["mcp", "add", *home, "web", "--url", "ftp://x"])
    assert bad.exit_code == 1 and "http:// or https:// url" in bad.output


async def test_an_owner_view_has_its_own_mcp_servers(tmp_path: Path) -> None:
    async with Tavern(tmp_path, load_plugins=False) as tk:
        bob = tk.for_owner("bob")
        await tk.mcp.add(stdio())
        assert await bob.mcp.registrations() == []
        assert bob.mcp is not tk.mcp
        # the plugins' provider sources are the Tavern's, shared with every view
        assert bob.runtime.provider_sources is tk.runtime.provider_sources
