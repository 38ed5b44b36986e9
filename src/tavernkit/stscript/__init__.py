"""STscript: SillyTavern 1.18's slash-command language, and its Quick Reply sets.

Entry points::

    from tavernkit.stscript import ScriptHost, run_script
    host = ScriptHost(user_name="Ann", char_name="Bo")
    result = await run_script("/setvar key=x 1 | /addvar key=x 2 | /getvar x", host)
    result.pipe  # "3"

- :mod:`.parser`: the grammar (pipes, closures, named/unnamed arguments, quoting, escaping,
  comments, parser flags), with SillyTavern's error messages and positions;
- :mod:`.executor`: pipes, argument substitution (the project's macro engine plus
  ``{{pipe}}``, ``{{var::}}``, ``{{arg::}}``, ``{{timesIndex}}``), closures and their scopes,
  ``/break`` and ``/abort``, and the step/time/depth budgets;
- :mod:`.registry`: commands as small registered functions; :mod:`.commands` the built-ins
  (variables, math, text, chat, generation, quick replies, regex, questions to the user);
- :mod:`.host`: what a script drives (chat, input box, toasts, generation, quick replies,
  regex), in memory; :mod:`tavernkit.chat.script_host` binds it to a stored chat;
- :mod:`.quick_replies`: Quick Reply sets and their global/chat/character bindings.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from tavernkit.stscript.commands import register_builtins
from tavernkit.stscript.executor import Budget, CommandCall, ScriptRunner
from tavernkit.stscript.host import (
    Answer,
    Asker,
    CharacterRef,
    GenerationRequest,
    NoRegex,
    Question,
    RegexBridge,
    RegexCommand,
    RegexPlacement,
    RegexReply,
    ScriptHost,
    Toast,
)
from tavernkit.stscript.parser import parse_script
from tavernkit.stscript.quick_replies import QuickReplyLibrary, SetLink, click_text, menu_reply
from tavernkit.stscript.registry import Command, CommandRegistry, NamedArgSpec
from tavernkit.stscript.scope import (
    ClosureResult,
    Scope,
    ScriptClosure,
)

__all__ = [
    "Answer",
    "Asker",
    "Budget",
    "CharacterRef",
    "ClosureResult",
    "Command",
    "CommandCall",
    "CommandRegistry",
    "GenerationRequest",
    "NamedArgSpec",
    "NoRegex",
    "Question",
    "QuickReplyLibrary",
    "RegexBridge",
    "RegexCommand",
    "RegexPlacement",
    "RegexReply",
    "Scope",
    "ScriptClosure",
    "ScriptHost",
    "ScriptRunner",
    "SetLink",
    "Toast",
    "click_text",
    "default_registry",
    "menu_reply",
    "parse_script",
    "run_script",
]


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
