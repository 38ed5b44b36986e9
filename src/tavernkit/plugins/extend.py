"""The parts of a ``Tavern`` plugins extend: its macro registry, renderer and provider sources.

``Tavern`` builds each once, as it is made, from its plugin manager, so a plugin's macros,
template functions and hosted APIs are that Tavern's alone (two Taverns in one process with
different plugins never see each other's). With no plugin implementing ``register_macros``
the renderer keeps the shared default macro registry: building a private copy of the ~150
built-ins costs time a plain Tavern does not need to spend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

from tavernkit.errors import PluginError
from tavernkit.generation.profiles import BUILTIN_SOURCES
from tavernkit.plugins.manager import call_each
from tavernkit.providers.sources import ProviderSources
from tavernkit.text.macros import register_builtins
from tavernkit.text.macros.registry import MacroDef, MacroRegistry
from tavernkit.text.render import PromptRenderer
from tavernkit.text.render.types import FunctionProvider

__all__ = [
    "plugin_macro_registry",
    "plugin_renderer",
    "plugin_sources",
]


def plugin_macro_registry(pm: pluggy.PluginManager) -> MacroRegistry | None:
    """The built-in macros plus the plugins' (``None`` when no plugin adds any)."""
    if not pm.hook.register_macros.get_hookimpls():
        return None
    # a private registry: the cached default one is shared by every Tavern of the process
    registry = register_builtins(MacroRegistry())
    builtin = frozenset(d.name.lower() for d in registry.definitions(include_aliases=True))

    def register(name: str, handler: Callable[..., Any], **options: Any) -> MacroDef:
        key = name.strip().lower() if isinstance(name, str) else ""
        if key in builtin:
            raise PluginError(f"macro {name!r} is built in and cannot be replaced by a plugin")
        if registry.get(key) is not None:
            raise PluginError(f"macro {name!r} is registered twice")
        try:
            return registry.register(name, handler, **options)
        except (TypeError, ValueError) as exc:
            raise PluginError(f"macro {name!r} cannot be registered: {exc}") from exc

    call_each(pm, "register_macros", register=register)
    return registry


def plugin_renderer(pm: pluggy.PluginManager) -> PromptRenderer:
    """A renderer with the plugins' macros and template functions."""
    renderer = PromptRenderer(registry=plugin_macro_registry(pm))
    taken: set[str] = set()

    def register(name: str, handler: FunctionProvider) -> Callable[[], None]:
        if not isinstance(name, str) or not name or not callable(handler):
            raise PluginError(
                f"register_template_functions needs a name and a callable, got {name!r}"
            )
        if name in taken:
            raise PluginError(f"template function {name!r} is registered twice")
        taken.add(name)
        return renderer.register_function_provider(name, handler)

    call_each(pm, "register_template_functions", register=register)
    return renderer


def plugin_sources(pm: pluggy.PluginManager) -> ProviderSources:
    """The plugins' provider sources (a profile's ``source`` names one)."""
    sources = ProviderSources(reserved=BUILTIN_SOURCES)
    call_each(pm, "register_providers", register=sources.register)
    return sources
