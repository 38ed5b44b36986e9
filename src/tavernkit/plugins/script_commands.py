"""The plugins' slash commands: the built-in STscript commands plus what plugins add with
``register_script_commands``. The facade imports this only when some plugin implements that
hook: the built-in commands cost a plain Tavern time it does not need to spend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

from tavernkit.errors import PluginError
from tavernkit.plugins.manager import call_each
from tavernkit.stscript.registry import CommandRegistry
from tavernkit.stscript.run import default_registry

__all__ = ["plugin_script_commands"]


def plugin_script_commands(pm: pluggy.PluginManager) -> CommandRegistry | None:
    """The built-in STscript commands plus the plugins' (``None`` when no plugin adds any)."""
    if not pm.hook.register_script_commands.get_hookimpls():
        return None
    registry = default_registry()

    def register(name: str, function: Callable[..., Any], **options: Any) -> object:
        if not isinstance(name, str) or not name or not callable(function):
            raise PluginError(f"register_script_commands needs a name and a callable, got {name!r}")
        if name in registry:
            raise PluginError(f"slash command /{name} is taken (built in, or registered twice)")
        try:
            return registry.register(name, function, **options)
        except TypeError as exc:
            raise PluginError(f"slash command /{name} cannot be registered: {exc}") from exc

    call_each(pm, "register_script_commands", register=register)
    return registry
