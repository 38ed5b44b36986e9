"""tavernkit's plugin system: pluggy hooks, entry points, and the built-in plugin.

A plugin is any object (usually a module) with ``@hookimpl`` functions named after the hooks in
``tavernkit.plugins.hookspecs``; installed packages expose one through an entry point in the
``tavernkit`` group::

    [project.entry-points.tavernkit]
    my_formats = "my_package.tavernkit_plugin"
"""

from __future__ import annotations

from tavernkit.plugins.formats import FormatHandler, FormatRegistry, RegisterFormat
from tavernkit.plugins.hookspecs import hookimpl, hookspec
from tavernkit.plugins.manager import (
    ENTRY_POINT_GROUP,
    LOAD_PLUGINS_ENV,
    add_plugin_commands,
    get_plugin_manager,
    load_entrypoint_plugins,
    plugin_allow_list,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "LOAD_PLUGINS_ENV",
    "FormatHandler",
    "FormatRegistry",
    "RegisterFormat",
    "add_plugin_commands",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
    "load_entrypoint_plugins",
    "plugin_allow_list",
]
