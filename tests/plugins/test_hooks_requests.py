"""Request hooks with an in-test plugin: ``before_request`` sees (and may change) every
outgoing request with its stream flag and scope; the main chat's hooks run for
``request_scope="main"`` and are skipped for ``extension_internal`` (every generate_task)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from generation._helpers import context, profile, setup_tavern  # tests/ is on sys.path
from generation._scripted_server import Reply, ScriptedServer
from tavernkit.generation.hooks import before_request_hook, chat_turn_hooks
from tavernkit.generation.result import TurnResult
from tavernkit.plugins import hookimpl
from tavernkit.providers.request import ChatPrompt, PromptRequest

USER = [{"role": "user", "content": "hello"}]


class Recorder:
    """Records every hook call; ``temperature`` replaces the request's when set."""

    def __init__(self, temperature: float | None = None) -> None:
        self.temperature = temperature
        self.requests: list[tuple[float | None, bool, str]] = []
        self.chat: list[tuple[str, Any]] = []

    @hookimpl
    def before_request(
        self, request: PromptRequest, stream: bool, scope: str
    ) -> PromptRequest | None:
        self.requests.append((request.sampling.temperature, stream, scope))
        if self.temperature is None:
            return None
        sampling = dataclasses.replace(request.sampling, temperature=self.temperature)
        return dataclasses.replace(request, sampling=sampling)

    @hookimpl
    def before_chat_turn(
        self, chat_id: str | None, kind: str, request: PromptRequest
    ) -> PromptRequest | None:
        self.chat.append(("before", kind))
        assert isinstance(request, ChatPrompt)
        return dataclasses.replace(request, stop=("\nAda:",))

    @hookimpl
    def after_chat_turn(self, chat_id: str | None, kind: str, result: TurnResult) -> None:
        self.chat.append(("after", result.status))


async def test_generate_task_is_extension_internal(tmp_path: Path) -> None:
    plugin = Recorder(temperature=0.25)
    async with ScriptedServer([Reply(text="Bonjour.")]) as server:
        tk, _ = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")])
        tk.plugins.register(plugin, name="recorder")
        try:
            result = await context(tk).generate_task(USER)
        finally:
            await tk.close()
    assert result.assistant_text == "Bonjour."
    # the preset's temperature (1) as sent to the hook, the hook's as sent upstream
    assert plugin.requests == [(1, False, "extension_internal")]
    assert server.requests[0].body["temperature"] == 0.25
    assert plugin.chat == []  # the main chat's hooks never see a task


async def test_main_scope_runs_the_chat_hooks(tmp_path: Path) -> None:
    plugin = Recorder()
    async with ScriptedServer([Reply(text="Hi.")]) as server:
        tk, _ = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")])
        tk.plugins.register(plugin, name="recorder")
        ctx = context(tk)
        try:
            body = await ctx.send_chat_request("normal", USER, request_scope="main")
            await ctx.send_chat_request("quiet", USER, request_scope="extension_internal")
        finally:
            await tk.close()
    assert body["choices"][0]["message"]["content"] == "Hi."
    assert [scope for _, _, scope in plugin.requests] == ["main", "extension_internal"]
    assert plugin.chat == [("before", "normal"), ("after", "completed")]
    # before_chat_turn's replacement is what went out
    assert server.requests[0].body["stop"] == ["\nAda:"]
    assert "stop" not in server.requests[1].body


async def test_request_hooks_chain_in_call_order(tmp_path: Path) -> None:
    first, second = Recorder(temperature=0.5), Recorder(temperature=0.75)
    async with ScriptedServer([Reply(text="ok")]) as server:
        tk, _ = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")])
        tk.plugins.register(first, name="first")
        tk.plugins.register(second, name="second")
        try:
            await context(tk).generate_task(USER)
        finally:
            await tk.close()
    # pluggy calls the last registered first; each hook sees the previous one's request
    assert second.requests == [(1, False, "extension_internal")]
    assert first.requests == [(0.75, False, "extension_internal")]
    assert server.requests[0].body["temperature"] == 0.5


def test_nothing_to_call_and_bad_returns() -> None:
    import pluggy
    import pytest

    from tavernkit.plugins import hookspecs

    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    assert before_request_hook(pm, "main") is None
    assert chat_turn_hooks(pm, "extension_internal").impls_before == ()

    class Broken:
        @hookimpl
        def before_request(self, request: PromptRequest) -> object:
            return "not a request"

    pm.register(Broken(), name="broken")
    hook = before_request_hook(pm, "main")
    assert hook is not None
    with pytest.raises(TypeError, match="broken"):
        hook(ChatPrompt(()), False)
