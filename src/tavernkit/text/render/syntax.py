"""Template syntaxes: how a template's text names variables and functions.

The renderer's providers do not depend on the syntax: a syntax gets the template and a
:class:`~tavernkit.text.render.context.RenderContext` and asks the context for names. The
default is SillyTavern's macro syntax (``{{name}}``, ``{{name::arg1::arg2}}``) evaluated by the
macro engine, with the context's variables and function providers laid over the built-in
macros. A later syntax (ChatLuna's ``{var}`` / ``{fn(args)}``) implements the same protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tavernkit.text.macros.env import MacroEnv
from tavernkit.text.macros.evaluator import render_macros
from tavernkit.text.macros.registry import MacroRegistry
from tavernkit.text.render.context import RenderContext, bind_function, bind_value
from tavernkit.text.render.types import RenderOptions

__all__ = ["ContextOverlay", "MacroSyntax", "SyntaxResult", "TemplateSyntax"]


@dataclass(frozen=True, slots=True)
class SyntaxResult:
    text: str
    warnings: tuple[str, ...] = ()


class TemplateSyntax(Protocol):
    """Renders ``source`` synchronously, resolving names through ``context``.

    It records nothing itself: the context records variable and function names as they are
    used; a syntax with built-in names of its own adds them to ``context.used``.
    """

    def render(
        self, source: str, context: RenderContext, options: RenderOptions
    ) -> SyntaxResult: ...


class ContextOverlay:
    """The context's names as a macro-engine overlay (names are case-insensitive there).

    For a bare ``{{name}}`` a variable wins over a function provider (ChatLuna's rule); a call
    with arguments goes to the function provider; both shadow built-in macros of that name.
    """

    __slots__ = ("_functions", "_keys", "_values")

    def __init__(self, context: RenderContext) -> None:
        self._functions: dict[str, Callable[[list[str]], Any]] = {
            name.lower(): bind_function(context, name) for name in context.functions
        }
        self._values: dict[str, Callable[[list[str]], Any]] = {
            name.lower(): bind_value(context, name) for name in context.variables
        }
        self._keys = frozenset(self._functions) | frozenset(self._values)

    def function(self, key: str, argc: int) -> Callable[[list[str]], Any] | None:
        if key not in self._keys:
            return None
        if argc == 0:
            value = self._values.get(key)
            if value is not None:
                return value
        return self._functions.get(key)

    def handles(self, key: str) -> bool:
        return key in self._keys


class MacroSyntax:
    """SillyTavern's ``{{macro}}`` syntax on the macro engine (see the module docstring)."""

    def __init__(self, registry: MacroRegistry | None = None) -> None:
        self.registry = registry

    def render(self, source: str, context: RenderContext, options: RenderOptions) -> SyntaxResult:
        env = options.env if options.env is not None else MacroEnv()
        overlay = ContextOverlay(context) if context.variables or context.functions else None
        result = render_macros(
            source,
            env,
            skip_side_effects=options.skip_side_effects,
            max_depth=options.max_depth,
            max_output_chars=options.max_output_chars,
            registry=self.registry,
            compat=options.compat,
            overlay=overlay,
            used=context.used,
        )
        return SyntaxResult(result.text, result.warnings)
