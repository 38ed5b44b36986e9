"""One render's names and how they are called: the part of a render that is syntax-free.

A :class:`RenderContext` holds the merged variables and function providers of one render and
records which names the render used. A syntax (``{{macro}}`` today, ChatLuna's ``{var}`` /
``{fn(args)}`` dialect later) only asks it ``has_variable`` / ``variable`` / ``has_function``
/ ``call``; it never sees how providers were registered or whether they are async.

Async providers and the synchronous engine
------------------------------------------
The macro engine is synchronous (one strict left-to-right pass, where a macro's arguments are
evaluated right before it, so results cannot be gathered up front without changing the order
of side effects such as ``{{setvar}}``). When a render may call an async provider, the renderer
runs the whole engine in a worker thread (``asyncio.to_thread``) and this context's
:class:`AsyncBridge` submits each awaitable back to the event loop and blocks the worker until
it is done; the order of evaluation stays exactly that of a synchronous render. Renders that
cannot reach an async provider run inline, with no thread hop. A provider that was not declared
``async`` but returns an awaitable anyway is awaited in a worker-thread render; in an inline one
inside a running loop it cannot be, so the macro is left as written with a warning.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from tavernkit.text.macros.registry import MacroRuntimeError
from tavernkit.text.render.types import FunctionProvider, RenderConfigurable

__all__ = ["AsyncBridge", "RenderContext", "is_async_callable"]


def is_async_callable(value: object) -> bool:
    """Whether calling ``value`` gives an awaitable by declaration (async def, or a callable
    object or partial around one)."""
    if inspect.iscoroutinefunction(value):
        return True
    func = getattr(value, "func", None)  # functools.partial
    if func is not None and inspect.iscoroutinefunction(func):
        return True
    call = getattr(value, "__call__", None)  # noqa: B004 - looking for an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


class AsyncBridge:
    """Turns awaitables into values for the synchronous engine (see the module docstring)."""

    __slots__ = ("loop",)

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        #: Set when the engine runs in a worker thread: awaitables go to this loop.
        self.loop = loop

    def resolve(self, value: Any) -> Any:
        if not inspect.isawaitable(value):
            return value
        if self.loop is not None:
            return asyncio.run_coroutine_threadsafe(_await(value), self.loop).result()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            # A plain synchronous caller: no loop to block, so run one for this value.
            return asyncio.run(_await(value))
        if inspect.iscoroutine(value):
            value.close()
        raise MacroRuntimeError(
            "returned an awaitable inside a running event loop; declare the provider "
            "`async def` (the renderer then awaits it) or make it synchronous"
        )


class RenderContext:
    """The merged names of one render (see ``PromptRenderer`` for the precedence)."""

    __slots__ = ("_resolved", "bridge", "configurable", "functions", "used", "variables")

    def __init__(
        self,
        variables: dict[str, Any],
        functions: Mapping[str, FunctionProvider],
        configurable: RenderConfigurable,
        bridge: AsyncBridge | None = None,
    ) -> None:
        self.variables = variables
        self.functions = functions
        self.configurable = configurable
        self.bridge = bridge or AsyncBridge()
        #: Names used so far, first-seen order (a dict keeps insertion order).
        self.used: dict[str, None] = {}
        self._resolved: dict[str, Any] = {}

    def has_variable(self, name: str) -> bool:
        return name in self.variables

    def variable(self, name: str) -> Any:
        """The value of a variable; a thunk is called (and awaited) once per render."""
        if name in self._resolved:
            value = self._resolved[name]
        else:
            value = self.variables[name]
            if callable(value):
                value = self.bridge.resolve(value())
                self._resolved[name] = value
        self.used.setdefault(name)
        return value

    def has_function(self, name: str) -> bool:
        return name in self.functions

    def call(self, name: str, args: list[str]) -> Any:
        """Call a function provider with string arguments; the name counts once it returned."""
        provider = self.functions[name]
        value = self.bridge.resolve(provider(list(args), self.variables, self.configurable))
        self.used.setdefault(name)
        return value

    def async_names(self) -> list[str]:
        """Names whose use needs the event loop (async providers and async thunks)."""
        names = [n for n, fn in self.functions.items() if is_async_callable(fn)]
        names.extend(n for n, v in self.variables.items() if is_async_callable(v))
        return names


def bind_value(context: RenderContext, name: str) -> Callable[[list[str]], Any]:
    def value(_args: list[str]) -> Any:
        return context.variable(name)

    return value


def bind_function(context: RenderContext, name: str) -> Callable[[list[str]], Any]:
    def function(args: list[str]) -> Any:
        return context.call(name, args)

    return function
