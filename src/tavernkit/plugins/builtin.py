"""tavernkit's own plugin: the built-in formats and commands, registered like anyone else's.

Registering the built-ins through the public hooks keeps those hooks honest (if our own card
reader can live behind ``register_formats``, so can a third party's) and means a test can swap
the whole set out by building a plugin manager without this module.

The formats themselves live in ``tavernkit.formats.handlers`` (pure functions, no pluggy).
"""

from __future__ import annotations

from tavernkit.formats.handlers import BUILTIN_FORMATS
from tavernkit.plugins.formats import RegisterFormat
from tavernkit.plugins.hookspecs import hookimpl


@hookimpl
def register_formats(register: RegisterFormat) -> None:
    for fmt in BUILTIN_FORMATS:
        register(fmt.name, fmt.detect, fmt.read, fmt.write, kind=fmt.kind, priority=fmt.priority)
