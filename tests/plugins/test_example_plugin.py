"""The example third-party plugin (tests/plugin_example) through every public hook.

It is made visible the way ``pip install`` makes a wheel visible: a ``.dist-info`` folder with
``METADATA`` and ``entry_points.txt`` on ``sys.path`` (and the package's ``src`` beside it), so
tavernkit finds it through ``importlib.metadata`` like any installed plugin; the CLI test runs
``tavernkit`` in a subprocess with the same path. The provider is exercised against the
scripted OpenAI-compatible server on loopback, the route on a real uvicorn server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from generation._scripted_server import Reply, ScriptedServer
from tavernkit.errors import PluginError
from tavernkit.facade import Tavern
from tavernkit.models.chat import Message
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.profile import CapabilityOverrides, ConnectionProfile, CredentialRef
from tavernkit.models.settings import Settings
from tavernkit.plugins import LOAD_PLUGINS_ENV, get_plugin_manager, hookimpl
from tavernkit.plugins.extend import plugin_renderer, plugin_sources
from tavernkit.plugins.manager import add_plugin_routes
from tavernkit.providers.retry import RetryPolicy
from tavernkit.providers.sources import ProviderSource

PLUGIN_SRC = Path(__file__).resolve().parents[1] / "plugin_example" / "src"
DIST = "tavernkit_example_plugin-0.1.0.dist-info"
CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Mira",
        "description": "Mira keeps the ferry. {{shout::ahoy}} ({{wordcount::one two}} words)",
        "first_mes": "Evening.",
    },
}


HOOKS = (
    "register_providers",
    "register_macros",
    "register_template_functions",
    "register_tools",
    "register_formats",
    "register_commands",
    "register_routes",
)


def _site(root: Path) -> Path:
    """A site folder holding the plugin's installed metadata, as pip would write it."""
    dist = root / DIST
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tavernkit-example-plugin\nVersion: 0.1.0\n"
    )
    (dist / "entry_points.txt").write_text("[tavernkit]\nexample = tavernkit_example_plugin\n")
    return root


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = _site(tmp_path / "site")
    monkeypatch.syspath_prepend(str(PLUGIN_SRC))
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv(LOAD_PLUGINS_ENV, "tavernkit-example-plugin")
    yield root


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as running:
        yield running


async def _tavern(home: Path, server: ScriptedServer) -> Tavern:
    tk = await Tavern(home).open()
    await tk.library.import_bytes(json.dumps(CARD).encode(), source="mira.json")
    profile = ConnectionProfile(
        name="cloud",
        api="chat",
        source="example-cloud",
        base_url=server.base_url + "/v1",
        model="cloud-1",
        credentials=[CredentialRef(env="EXAMPLE_CLOUD_KEY")],
        capabilities=CapabilityOverrides(supports_tools=True),
    )
    await tk.store.put("connection_profile", profile)
    settings = Settings()
    settings.selections.profile = "cloud"
    settings.selections.character = "Mira"
    settings.selections.user_name = "Ada"
    await tk.store.put_settings(settings)
    return tk


async def test_the_entry_point_is_found_like_an_installed_plugin(site: Path) -> None:
    pm = get_plugin_manager()
    assert pm.has_plugin("example")
    missing = [
        name
        for name in HOOKS
        if not any(i.plugin_name == "example" for i in getattr(pm.hook, name).get_hookimpls())
    ]
    assert missing == []


async def test_macro_and_template_function_render_in_the_tavern(site: Path, tmp_path: Path) -> None:
    async with Tavern(tmp_path / "home") as tk:
        result = await tk.prompt_renderer.render_template("{{shout::ahoy}} {{wordcount::a b c}}")
    assert result.text == "AHOY! 3"
    # a Tavern without the plugin has neither
    async with Tavern(tmp_path / "bare", load_plugins=False) as bare:
        plain = await bare.prompt_renderer.render_template("{{shout::ahoy}}|{{wordcount::a}}")
    assert plain.text == "{{shout::ahoy}}|{{wordcount::a}}"


async def test_the_plugin_provider_and_macros_serve_a_generate_task(
    site: Path, tmp_path: Path, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXAMPLE_CLOUD_KEY", "sk-example-123")
    server.script(Reply(text="Aye."))
    tk = await _tavern(tmp_path / "home", server)
    try:
        task = [{"role": "user", "content": "Say {{shout::aye}} ({{wordcount::a b}} words)."}]
        result = await tk.context(retry=RetryPolicy(max_retries=0)).generate_task(task)
    finally:
        await tk.close()
    assert result.assistant_text == "Aye."
    (sent,) = server.requests
    # the plugin's source: its auth header scheme, its adapter's path, the profile's model
    assert sent.headers["x-api-key"] == "sk-example-123"
    assert "authorization" not in sent.headers
    assert sent.path == "/v1/chat/completions" and sent.body["model"] == "cloud-1"
    # the task's own macros went through the Tavern's renderer too
    assert sent.body["messages"][-1]["content"] == "Say AYE! (2 words)."


async def test_a_chat_turn_uses_the_plugin_provider_macro_function_and_tool(
    site: Path, tmp_path: Path, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXAMPLE_CLOUD_KEY", "sk-example-123")
    args = {"text": "Banana", "letter": "a"}
    server.script(Reply(tool_calls=[("count_letters", args)]), Reply(text="Three of them."))
    tk = await _tavern(tmp_path / "home", server)
    try:
        assert tk.tools.get("count_letters") is not None
        info = await tk.chats.new_chat("Mira")
        out = await tk.chats.send(info.id, "How many a's in Banana?")
        assert out.status == "completed", out.error
        stored = await tk.chats.load(info.id)
    finally:
        await tk.close()
    assert out.text == "Three of them."
    first = server.requests[0]
    assert first.headers["x-api-key"] == "sk-example-123"
    # the card's macro and template function went through the Tavern's renderer
    assert any("AHOY! (2 words)" in str(m["content"]) for m in first.body["messages"])
    offered = [t["function"]["name"] for t in server.requests[0].body["tools"]]
    assert offered == ["count_letters"]
    assert server.requests[1].body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": "3",
    }
    tools_message = Message.model_validate(stored.messages[2].data)
    (invocation,) = tools_message.extra.tool_invocations or []
    assert invocation.to_wire()["result"] == "3"


async def test_the_plugin_format_imports_and_exports(site: Path, tmp_path: Path) -> None:
    notes = tmp_path / "harbour.txt"
    notes.write_bytes(b"#keyword-notes\nferry, boat: The ferry leaves at dusk.\ntoll: Two coins.\n")
    async with Tavern(tmp_path / "home") as tk:
        (result,) = await tk.library.import_file(notes)
        book = await tk.store.get("lorebook", result.name, owner=tk.owner)
        handler = tk.formats.get("keyword-notes")
        assert handler.write is not None
        exported = handler.write(book)
    assert result.kind == "lorebook" and result.name == "harbour"
    assert isinstance(book, Lorebook)
    assert [(e.keys, e.content) for e in book.entries.values()] == [
        (["ferry", "boat"], "The ferry leaves at dusk."),
        (["toll"], "Two coins."),
    ]
    assert exported == notes.read_bytes()


def test_the_plugin_command_runs_from_the_tavernkit_cli(site: Path) -> None:
    src = Path(__file__).resolve().parents[2] / "src"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(PLUGIN_SRC), str(src)]),
        LOAD_PLUGINS_ENV: "tavernkit-example-plugin",
    }
    done = subprocess.run(
        [sys.executable, "-c", "from tavernkit.cli import main; main()", "example-hello", "Ada"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hello Ada, from the example plugin"


async def test_the_plugin_route_is_served_by_tavernkit_serve(site: Path, tmp_path: Path) -> None:
    from server._live import live_server
    from tavernkit.server.settings import ServerSettings

    async with (
        live_server(ServerSettings(home=tmp_path / "home")) as server,
        server.client() as client,
    ):
        reply = await client.get("/plugins/example/ping")
        schema = (await client.get("/openapi.json")).json()
    assert reply.status_code == 200
    assert reply.json() == {"plugin": "example", "reply": "pong"}
    assert "/plugins/example/ping" in schema["paths"]


# -- the hooks' rules, with in-file plugins ----------------------------------------------------


class _Taker:
    def __init__(self, macro: str = "", source: str = "", function: str = "") -> None:
        self.macro, self.source, self.function = macro, source, function

    @hookimpl
    def register_macros(self, register: object) -> None:
        if self.macro:
            register(self.macro, lambda call: "x")  # type: ignore[operator]

    @hookimpl
    def register_providers(self, register: object) -> None:
        if self.source:
            register(ProviderSource(self.source))  # type: ignore[operator]

    @hookimpl
    def register_template_functions(self, register: object) -> None:
        if self.function:
            register(self.function, lambda args, variables, conf: "f")  # type: ignore[operator]


def _extend(*plugins: object) -> None:
    pm = get_plugin_manager(load_entrypoints=False)
    for index, plugin in enumerate(plugins):
        pm.register(plugin, name=f"p{index}")
    plugin_renderer(pm)
    plugin_sources(pm)


@pytest.mark.parametrize(
    ("plugins", "message"),
    [
        ((_Taker(macro="user"),), "macro 'user' is built in"),
        ((_Taker(macro="echo2"), _Taker(macro="ECHO2")), "macro 'ECHO2' is registered twice"),
        ((_Taker(macro="9bad"),), "macro '9bad' cannot be registered"),
        ((_Taker(source="openai"),), "provider source 'openai' is built in"),
        ((_Taker(source="mine"), _Taker(source="mine")), "'mine' is registered twice"),
        ((_Taker(source="Bad Name"),), "provider source name 'Bad Name' is invalid"),
        ((_Taker(macro="user"), _Taker()), "plugin 'p0' in register_macros: macro 'user'"),
        ((_Taker(function="f"), _Taker(function="f")), "template function 'f' is registered twice"),
    ],
)
def test_a_plugin_cannot_take_a_builtin_or_taken_name(
    plugins: tuple[object, ...], message: str
) -> None:
    with pytest.raises(PluginError, match=message):
        _extend(*plugins)


def test_a_failing_route_plugin_is_named() -> None:
    class Broken:
        @hookimpl
        def register_routes(self, app: object) -> None:
            raise RuntimeError("no router here")

    pm = get_plugin_manager(load_entrypoints=False, include_builtins=False)
    pm.register(Broken(), name="broken-routes")
    with pytest.raises(PluginError, match="'broken-routes' failed in register_routes"):
        add_plugin_routes(pm, object())


def test_a_provider_source_is_checked_when_registered() -> None:
    from tavernkit.providers.sources import ProviderSources

    sources = ProviderSources()
    with pytest.raises(PluginError, match="adapter must make an Adapter"):
        sources.register(ProviderSource("x", adapter=42))  # type: ignore[arg-type]
    with pytest.raises(PluginError, match="expects a ProviderSource"):
        sources.register({"name": "x"})  # type: ignore[arg-type]
    sources.register(ProviderSource("fine"))
    assert list(sources) == ["fine"] and sources["fine"].auth == "bearer"
