"""The plugin manager, the format registry and the entry-point loader.

Plugins here are objects defined in this file and registered with ``pm.register``, or fake
entry points; no installed third-party plugin is ever loaded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pluggy
import pytest
import typer
from typer.testing import CliRunner

from tavernkit.errors import FormatError, PluginError
from tavernkit.plugins import (
    LOAD_PLUGINS_ENV,
    FormatRegistry,
    RegisterFormat,
    add_plugin_commands,
    get_plugin_manager,
    hookimpl,
    plugin_allow_list,
)

NO_PLUGINS = {LOAD_PLUGINS_ENV: ""}


class ShoutFormat:
    """Reads ``SHOUT:<text>`` files as upper-case text, and writes them back."""

    @hookimpl
    def register_formats(self, register: RegisterFormat) -> None:
        register(
            "shout",
            detect=lambda data: data.startswith(b"SHOUT:"),
            read=lambda data, source: data[6:].decode("utf-8").upper(),
            write=lambda value: b"SHOUT:" + str(value).encode("utf-8"),
            kind="note",
        )


class AnyBytesFormat:
    """Accepts everything: a fallback that must not shadow specific formats."""

    def __init__(self, name: str = "raw", priority: int = 0) -> None:
        self.name = name
        self.priority = priority

    @hookimpl
    def register_formats(self, register: RegisterFormat) -> None:
        register(
            self.name,
            lambda data: True,
            lambda data, source: data,
            priority=self.priority,
        )


def manager(*plugins: tuple[object, str]) -> pluggy.PluginManager:
    """A manager holding only the given plugins, so built-in formats cannot interfere."""
    pm = get_plugin_manager(load_entrypoints=False, include_builtins=False)
    for plugin, name in plugins:
        pm.register(plugin, name=name)
    return pm


def test_manager_has_the_hooks_and_the_builtin_plugin() -> None:
    pm = get_plugin_manager(load_entrypoints=False)
    assert pm.project_name == "tavernkit"
    assert hasattr(pm.hook, "register_formats")
    assert hasattr(pm.hook, "register_commands")
    assert pm.has_plugin("tavernkit.plugins.builtin")
    assert get_plugin_manager(load_entrypoints=False) is not pm  # no shared global manager
    assert get_plugin_manager(load_entrypoints=False, include_builtins=False).get_plugins() == set()


def test_builtin_formats_register_through_the_same_hook() -> None:
    pm = get_plugin_manager(load_entrypoints=False)
    pm.register(ShoutFormat(), name="shout-plugin")
    registry = FormatRegistry.from_plugins(pm)
    builtin = [h for h in registry if h.plugin == "tavernkit.plugins.builtin"]
    assert builtin, "the built-in plugin registers tavernkit's own formats"
    assert registry.get("shout").plugin == "shout-plugin"
    assert len(registry) == len(builtin) + 1


def test_a_plugin_format_is_detected_read_and_written() -> None:
    registry = FormatRegistry.from_plugins(manager((ShoutFormat(), "shout-plugin")))
    handler = registry.detect(b"SHOUT:hello")
    assert handler is not None
    assert handler.name == "shout"
    assert handler.kind == "note"
    assert handler.plugin == "shout-plugin"
    assert registry.read(b"SHOUT:hello", "a.txt") == (handler, "HELLO")
    assert handler.write is not None
    assert handler.write("HELLO") == b"SHOUT:HELLO"
    assert registry.get("shout") is handler
    assert "shout" in registry
    assert [h.name for h in registry.writers()] == ["shout"]
    assert registry.detect(b"whisper") is None


def test_unknown_bytes_and_names_are_format_errors() -> None:
    registry = FormatRegistry.from_plugins(manager((ShoutFormat(), "shout-plugin")))
    with pytest.raises(FormatError) as info:
        registry.read(b"\x89PNG...", "card.png")
    assert info.value.source == "card.png"
    with pytest.raises(FormatError, match=r"unknown format 'pdf' \(known: shout\)"):
        registry.get("pdf")


def test_detection_order_is_priority_then_registration() -> None:
    pm = manager(
        (AnyBytesFormat("raw"), "fallback"),
        (ShoutFormat(), "shout-plugin"),
        (AnyBytesFormat("urgent", priority=10), "urgent-plugin"),
    )
    registry = FormatRegistry.from_plugins(pm)
    assert [h.name for h in registry] == ["urgent", "raw", "shout"]
    assert registry.names() == ["raw", "shout", "urgent"]
    detected = registry.detect(b"SHOUT:x")
    assert detected is not None and detected.name == "urgent"


def test_two_plugins_claiming_one_name_is_an_error() -> None:
    pm = manager((AnyBytesFormat("raw"), "first"), (AnyBytesFormat("raw"), "second"))
    with pytest.raises(PluginError, match="'raw' is registered by both 'first' and 'second'"):
        FormatRegistry.from_plugins(pm)


class BrokenRegistration:
    @hookimpl
    def register_formats(self, register: RegisterFormat) -> None:
        raise RuntimeError("boom")


class NotCallableDetector:
    @hookimpl
    def register_formats(self, register: RegisterFormat) -> None:
        register("odd", "not a function", lambda data, source: None)  # type: ignore[arg-type]


def test_a_failing_registration_names_the_plugin() -> None:
    with pytest.raises(PluginError, match="'broken' failed in register_formats: boom"):
        FormatRegistry.from_plugins(manager((BrokenRegistration(), "broken")))
    with pytest.raises(PluginError, match="format 'odd' has no callable detect"):
        FormatRegistry.from_plugins(manager((NotCallableDetector(), "odd-plugin")))


class FaultyFormat:
    def __init__(self, detect_error: bool) -> None:
        self.detect_error = detect_error

    @hookimpl
    def register_formats(self, register: RegisterFormat) -> None:
        def detect(data: bytes) -> bool:
            if self.detect_error:
                raise IndexError("detector bug")
            return True

        def read(data: bytes, source: str) -> object:
            if data == b"bad":
                raise FormatError("bad input", source=source, field="body")
            raise KeyError("reader bug")

        register("faulty", detect, read)


def test_plugin_bugs_become_plugin_errors_but_format_errors_pass_through() -> None:
    crashing_detector = FormatRegistry.from_plugins(manager((FaultyFormat(True), "faulty")))
    with pytest.raises(PluginError, match="detect raised IndexError: detector bug"):
        crashing_detector.detect(b"x")
    registry = FormatRegistry.from_plugins(manager((FaultyFormat(False), "faulty")))
    with pytest.raises(PluginError, match=r"plugin 'faulty' failed on f\.bin: KeyError"):
        registry.read(b"x", "f.bin")
    with pytest.raises(FormatError) as info:
        registry.read(b"bad", "f.bin")
    assert not isinstance(info.value, PluginError)
    assert info.value.field == "body"


class HelloCommand:
    @hookimpl
    def register_commands(self, cli: typer.Typer) -> None:
        @cli.command()
        def hello(name: str) -> None:
            """Greets NAME."""
            typer.echo(f"Hello {name}")


class BrokenCommand:
    @hookimpl
    def register_commands(self, cli: typer.Typer) -> None:
        raise ValueError("no commands today")


def make_app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """A stand-in for the tavernkit CLI."""

    return app


def test_plugins_add_cli_commands() -> None:
    app = make_app()
    add_plugin_commands(manager((HelloCommand(), "hello-plugin")), app)
    result = CliRunner().invoke(app, ["hello", "Seraphina"])
    assert result.exit_code == 0, result.output
    assert result.output == "Hello Seraphina\n"


def test_a_failing_command_plugin_is_named() -> None:
    with pytest.raises(PluginError, match="'broken-cli' failed in register_commands"):
        add_plugin_commands(manager((BrokenCommand(), "broken-cli")), make_app())


# --- entry points ------------------------------------------------------------------------


@dataclass
class FakeDist:
    name: str


@dataclass
class FakeEntryPoint:
    name: str
    plugin: Any = None
    error: Exception | None = None
    dist: FakeDist | None = None

    @property
    def value(self) -> str:
        return f"fake_module_{self.name}:plugin"

    def load(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.plugin


def untouchable() -> Iterator[FakeEntryPoint]:
    raise AssertionError("entry points must not be enumerated")
    yield  # pragma: no cover


def test_allow_list_parsing() -> None:
    assert plugin_allow_list({}) is None
    assert plugin_allow_list({LOAD_PLUGINS_ENV: ""}) == frozenset()
    assert plugin_allow_list({LOAD_PLUGINS_ENV: " , "}) == frozenset()
    assert plugin_allow_list({LOAD_PLUGINS_ENV: "shout, My_Plugin.x"}) == {"shout", "my-plugin-x"}


def test_unset_variable_loads_every_entry_point() -> None:
    entry_points = [FakeEntryPoint("shout", ShoutFormat()), FakeEntryPoint("raw", AnyBytesFormat())]
    pm = get_plugin_manager(include_builtins=False, environ={}, entry_points=entry_points)
    assert pm.has_plugin("shout") and pm.has_plugin("raw")
    assert FormatRegistry.from_plugins(pm).names() == ["shout", "raw"]


def test_empty_variable_or_flag_loads_nothing() -> None:
    pm = get_plugin_manager(environ=NO_PLUGINS, entry_points=untouchable())
    assert [name for name, _ in pm.list_name_plugin()] == ["tavernkit.plugins.builtin"]
    pm = get_plugin_manager(load_entrypoints=False, environ={}, entry_points=untouchable())
    assert len(pm.get_plugins()) == 1


def test_allow_list_matches_entry_point_or_distribution_names() -> None:
    entry_points = [
        FakeEntryPoint("shout", ShoutFormat(), dist=FakeDist("tavernkit-shout")),
        FakeEntryPoint("raw", AnyBytesFormat()),
    ]
    allow = {LOAD_PLUGINS_ENV: "tavernkit_shout"}
    pm = get_plugin_manager(environ=allow, entry_points=entry_points)
    assert pm.has_plugin("shout")
    assert not pm.has_plugin("raw")


def test_allow_list_naming_a_missing_plugin_fails() -> None:
    with pytest.raises(PluginError, match="not installed: nope"):
        get_plugin_manager(
            environ={LOAD_PLUGINS_ENV: "raw,nope"},
            entry_points=[FakeEntryPoint("raw", AnyBytesFormat())],
        )


def test_a_plugin_that_fails_to_import_is_named() -> None:
    broken = FakeEntryPoint("broken", error=ImportError("No module named 'missing_dep'"))
    with pytest.raises(PluginError) as info:
        get_plugin_manager(environ={}, entry_points=[broken])
    assert "plugin 'broken' (fake_module_broken:plugin) failed to load" in str(info.value)
    assert "missing_dep" in str(info.value)
    assert isinstance(info.value.__cause__, ImportError)


class TypoHook:
    @hookimpl
    def register_format(self, register: RegisterFormat) -> None:  # missing "s"
        pass


class WrongArguments:
    @hookimpl
    def register_formats(self, registry: object) -> None:
        pass


@pytest.mark.parametrize("plugin", [TypoHook(), WrongArguments()], ids=["typo", "arguments"])
def test_an_invalid_plugin_is_refused_by_name(plugin: object) -> None:
    with pytest.raises(PluginError, match="plugin 'bad' cannot be registered"):
        get_plugin_manager(environ={}, entry_points=[FakeEntryPoint("bad", plugin)])


def test_the_same_plugin_twice_is_refused() -> None:
    plugin = ShoutFormat()
    entry_points = [FakeEntryPoint("one", plugin), FakeEntryPoint("two", plugin)]
    with pytest.raises(PluginError, match="plugin 'two' cannot be registered"):
        get_plugin_manager(environ={}, entry_points=entry_points)
