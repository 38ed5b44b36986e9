"""tavernkit.text: the macro engine and macro variables (every prompt text passes through it)."""

from __future__ import annotations

from tavernkit.text.macros import MacroEnv, MacroRegistry, render_macros, substitute_macros
from tavernkit.text.variables import InMemoryVariables, VariableStore

__all__ = [
    "InMemoryVariables",
    "MacroEnv",
    "MacroRegistry",
    "VariableStore",
    "render_macros",
    "substitute_macros",
]
