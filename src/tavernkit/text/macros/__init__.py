"""The macro engine: SillyTavern 1.18 "Macros 2.0" semantics on a real lexer, parser, evaluator.

Entry points::

    from tavernkit.text.macros import MacroEnv, substitute_macros
    substitute_macros("Hello {{user}}", MacroEnv(user="Ann", char="Bo"))

``render_macros`` returns the text with the warnings of the render; ``default_registry()`` is
the registry custom macros register on (``MacroRegistry.register``). See ``evaluator`` for the
evaluation order (SillyTavern's single left-to-right pass, a deliberate deviation from the
product brief's variables-first order).
"""

from __future__ import annotations

from tavernkit.text.macros.builtins import default_registry, register_builtins
from tavernkit.text.macros.env import Compat, MacroEnv, env_from_chat_state
from tavernkit.text.macros.evaluator import MacroResult, render_macros, substitute_macros
from tavernkit.text.macros.registry import ArgSpec, MacroCall, MacroRegistry, MacroRuntimeError

__all__ = [
    "ArgSpec",
    "Compat",
    "MacroCall",
    "MacroEnv",
    "MacroRegistry",
    "MacroResult",
    "MacroRuntimeError",
    "default_registry",
    "env_from_chat_state",
    "register_builtins",
    "render_macros",
    "substitute_macros",
]
