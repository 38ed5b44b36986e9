"""Running a script with the built-in commands: :func:`run_script` and
:func:`default_registry` (importing this imports the parser, the executor and every built-in
command)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from tavernkit.stscript.commands import register_builtins
from tavernkit.stscript.executor import Budget, ScriptRunner
from tavernkit.stscript.host import ScriptHost
from tavernkit.stscript.registry import CommandRegistry
from tavernkit.stscript.scope import ClosureResult

__all__ = ["default_registry", "run_script"]


@cache
def _builtins() -> CommandRegistry:
    return register_builtins(CommandRegistry())


def default_registry() -> CommandRegistry:
    """A new registry with every built-in command (add your own to it)."""
    return _builtins().copy()


async def run_script(
    text: str,
    host: ScriptHost,
    *,
    registry: CommandRegistry | None = None,
    budget: Budget | None = None,
    rng: Callable[[], float] | None = None,
    flags: dict[int, bool] | None = None,
) -> ClosureResult | None:
    """Run ``text`` on ``host`` (``executeSlashCommandsWithOptions`` with both error handlers
    off): the result, None for an empty text; a script that does not parse or fails raises
    :class:`~tavernkit.errors.ScriptError`."""
    runner = ScriptRunner(
        host,
        registry if registry is not None else _builtins(),
        budget=budget or Budget(),
        rng=rng,
        parser_flags=flags,
    )
    return await runner.run(text)
