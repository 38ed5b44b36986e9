"""The built-in macro catalogue of SillyTavern 1.18, by family, plus tavernkit's additions."""

from __future__ import annotations

from functools import cache

from tavernkit.text.macros.builtins import additions, chat, core, instruct, names, time, variables
from tavernkit.text.macros.registry import MacroRegistry

__all__ = ["default_registry", "register_builtins"]


def register_builtins(registry: MacroRegistry) -> MacroRegistry:
    for family in (core, names, chat, time, variables, instruct, additions):
        family.register(registry)
    return registry


@cache
def default_registry() -> MacroRegistry:
    """The shared registry with the built-ins (plugins add to it; tests build their own)."""
    return register_builtins(MacroRegistry())
