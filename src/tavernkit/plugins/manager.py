"""Building the plugin manager: hook specs, the built-in plugin, then installed plugins.

Third-party plugins are setuptools entry points in the ``tavernkit`` group (like simonw/llm's
``llm`` group). ``TAVERNKIT_LOAD_PLUGINS`` controls which load: unset loads every installed
plugin, an empty value loads none (what tests and reproducible CI runs want), and a comma list
is an allow-list of entry-point or distribution names. There is no module-level plugin manager:
each ``Tavern`` (and each test) builds its own, so nothing leaks between them.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

import tavernkit.plugins.hookspecs as hookspecs
from tavernkit.errors import PluginError, TavernKitError

if TYPE_CHECKING:
    import typer

__all__ = [
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "LOAD_PLUGINS_ENV",
    "EntryPointLike",
    "add_plugin_commands",
    "add_plugin_routes",
    "call_each",
    "get_plugin_manager",
    "load_entrypoint_plugins",
    "plugin_allow_list",
]

ENTRY_POINT_GROUP = "tavernkit"
LOAD_PLUGINS_ENV = "TAVERNKIT_LOAD_PLUGINS"
BUILTIN_PLUGINS: tuple[str, ...] = ("tavernkit.plugins.builtin",)


class EntryPointLike(Protocol):
    """What the loader needs of an ``importlib.metadata.EntryPoint``."""

    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str: ...

    def load(self) -> Any: ...


def get_plugin_manager(
    *,
    load_entrypoints: bool = True,
    include_builtins: bool = True,
    environ: Mapping[str, str] | None = None,
    entry_points: Iterable[EntryPointLike] | None = None,
) -> pluggy.PluginManager:
    """A new plugin manager with the hook specs, the built-ins and (optionally) installed plugins.

    ``include_builtins=False`` leaves out tavernkit's own formats and commands (tests of the
    plugin machinery, or a host that wants only its own plugins). ``environ`` (default
    ``os.environ``) is read for ``TAVERNKIT_LOAD_PLUGINS``; ``entry_points`` replaces the
    installed entry points (for tests).
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    for module_name in BUILTIN_PLUGINS if include_builtins else ():
        _register(pm, importlib.import_module(module_name), module_name)
    if load_entrypoints:
        allow = plugin_allow_list(os.environ if environ is None else environ)
        if allow is None or allow:
            found = _installed_entry_points() if entry_points is None else entry_points
            load_entrypoint_plugins(pm, found, allow=allow)
    return pm


def plugin_allow_list(environ: Mapping[str, str]) -> frozenset[str] | None:
    """None: load every installed plugin; an empty set: none; otherwise only those names."""
    raw = environ.get(LOAD_PLUGINS_ENV)
    if raw is None:
        return None
    return frozenset(_normalize(part) for part in raw.split(",") if part.strip())


def load_entrypoint_plugins(
    pm: pluggy.PluginManager,
    entry_points: Iterable[EntryPointLike],
    *,
    allow: frozenset[str] | None = None,
) -> list[str]:
    """Load and register the given entry points; returns the names registered.

    Every failure (import error, a broken hook implementation, a name already taken) becomes
    a ``PluginError`` naming the plugin, so one bad plugin gives one clear line instead of a
    traceback from deep inside importlib or pluggy.
    """
    loaded: list[str] = []
    requested = set(allow) if allow is not None else set()
    for entry_point in entry_points:
        names = {_normalize(entry_point.name)}
        dist_name = _distribution_name(entry_point)
        if dist_name:
            names.add(_normalize(dist_name))
        if allow is not None and not names & allow:
            continue
        requested -= names
        try:
            plugin = entry_point.load()
        except Exception as exc:
            raise PluginError(
                f"plugin {entry_point.name!r} ({entry_point.value}) failed to load: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        _register(pm, plugin, entry_point.name)
        loaded.append(entry_point.name)
    if requested:
        raise PluginError(
            f"{LOAD_PLUGINS_ENV} names plugins that are not installed: "
            + ", ".join(sorted(requested))
        )
    return loaded


def add_plugin_commands(pm: pluggy.PluginManager, cli: typer.Typer) -> None:
    """Let every plugin add its sub-commands to ``cli`` (called once by the CLI at start-up)."""
    call_each(pm, "register_commands", cli=cli)


def add_plugin_routes(pm: pluggy.PluginManager, app: object) -> None:
    """Let every plugin add its routes to the server's FastAPI ``app`` (the server calls this
    once per application it builds)."""
    call_each(pm, "register_routes", app=app)


def call_each(pm: pluggy.PluginManager, hook: str, **kwargs: object) -> None:
    """Call every implementation of ``hook`` (in registration order), naming the plugin that
    fails: a ``PluginError`` (something it registered was refused) gets the plugin's name in
    front, another tavernkit error passes through as it is, any other exception becomes a
    ``PluginError``."""
    for impl in getattr(pm.hook, hook).get_hookimpls():
        try:
            impl.function(**{name: kwargs[name] for name in impl.argnames if name in kwargs})
        except PluginError as exc:
            raise PluginError(f"plugin {impl.plugin_name!r} in {hook}: {exc}") from exc
        except TavernKitError:
            raise
        except Exception as exc:
            raise PluginError(
                f"plugin {impl.plugin_name!r} failed in {hook}: {type(exc).__name__}: {exc}"
            ) from exc


def _register(pm: pluggy.PluginManager, plugin: object, name: str) -> None:
    try:
        pm.register(plugin, name=name)
        # An implementation of a hook nobody specified is almost always a typo; a plugin
        # written for a newer tavernkit marks such hooks optionalhook=True.
        pm.check_pending()
    except (ValueError, pluggy.PluginValidationError) as exc:
        if pm.is_registered(plugin):
            pm.unregister(plugin)
        raise PluginError(f"plugin {name!r} cannot be registered: {exc}") from exc


def _installed_entry_points() -> list[EntryPointLike]:
    return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def _distribution_name(entry_point: EntryPointLike) -> str | None:
    dist = getattr(entry_point, "dist", None)
    name = getattr(dist, "name", None) if dist is not None else None
    return name if isinstance(name, str) else None


def _normalize(name: str) -> str:
    """Compare names the way pip does: case-insensitive, ``-``/``_``/``.`` alike."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()
