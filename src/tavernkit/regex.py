"""The regex scripts as STscript reaches them: the bridge a script host holds (``host.regex``).

:class:`ScriptsBridge` is :class:`~tavernkit.stscript.host.RegexBridge` over a moment's
:class:`~tavernkit.text.regex_scripts.ScriptLists` (global, preset and character lists with
their allow answers): ``apply`` is ``getRegexedString`` over the allowed lists, as a message a
script adds (``/send``, ``/sendas``) or a reply it receives is stored; ``command`` is
``/regex``, ``/regex-state`` and ``/regex-toggle``, which look through all three lists
whatever the allow lists say (reference A8). A toggle changes the bridge's lists at once and is
handed to ``store_toggle`` (a stored chat writes it where the script lives: the owner's global
list, the card or the preset).

Macros come from the host's environment, passed in by the caller (the chat's names, card
fields and variables), so the bridge itself holds no chat state.

:func:`script_bridge` is the bridge over a list of global scripts alone (what the
conformance suite and tests build); a stored chat builds its own from the chat's state
(:mod:`tavernkit.chat.script_host`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tavernkit.models.regex_script import RegexScript
from tavernkit.prompt.macros import MacroSubstitute
from tavernkit.prompt.regex import regex_macros
from tavernkit.stscript.host import RegexCommand, RegexReply, Toast
from tavernkit.text.macros import MacroEnv
from tavernkit.text.regex_scripts import (
    ActiveScripts,
    CommandResult,
    RegexMacros,
    ScriptLists,
    plain_macros,
    regex_command,
    regex_state,
    regex_toggle,
    replace_script,
)

__all__ = ["ScriptsBridge", "StoreToggle", "script_bridge"]

#: stores a ``/regex-toggle``'s change where the script lives (its scope and index are in it)
StoreToggle = Callable[[CommandResult], Awaitable[None]]

#: the macro dialect scripts run under (SillyTavern 1.18's ``substituteParams``)
COMPAT = "st-1.18"


@dataclass(eq=False)
class ScriptsBridge:
    """:class:`~tavernkit.stscript.host.RegexBridge` over ``lists`` (see the module
    docstring)."""

    lists: ScriptLists
    store_toggle: StoreToggle | None = None
    _active: ActiveScripts | None = field(default=None, init=False, repr=False)

    @property
    def active(self) -> ActiveScripts:
        """The scripts a storage call runs (allowed lists only), computed once per change."""
        if self._active is None:
            self._active = self.lists.active()
        return self._active

    def apply(
        self,
        text: str,
        placement: int,
        *,
        character_override: str | None = None,
        env: MacroEnv | None = None,
    ) -> str:
        """``getRegexedString(text, placement)`` with no flags (what is stored)."""
        if not self.active:
            return text
        return self.active.run(text, placement, _macros(env), character_override=character_override)

    async def command(
        self,
        command: RegexCommand,
        script: str | None,
        text: str = "",
        *,
        state: str | None = None,
        quiet: bool = False,
        env: MacroEnv | None = None,
    ) -> RegexReply:
        """``/regex``, ``/regex-state`` or ``/regex-toggle``: the pipe value and the toasts."""
        if command == "regex":
            result = regex_command(self.lists, script, text, _macros(env))
        elif command == "regex-state":
            result = regex_state(self.lists, script or "")
        else:
            result = regex_toggle(self.lists, script or "", state=state, quiet=quiet)
            if result.changed is not None:
                self.lists = replace_script(self.lists, result)
                self._active = None
                if self.store_toggle is not None:
                    await self.store_toggle(result)
        toasts = tuple(Toast(n.kind, n.message) for n in result.notices)
        return RegexReply(result.output, toasts)


def _macros(env: MacroEnv | None) -> RegexMacros:
    """The scripts' macros over the host's environment (none without one)."""
    if env is None:
        return plain_macros()
    return regex_macros(MacroSubstitute(env, compat=COMPAT))


def script_bridge(
    scripts: Sequence[RegexScript | Mapping[str, Any]],
    *,
    store_toggle: StoreToggle | None = None,
) -> ScriptsBridge:
    """A bridge over ``scripts`` as the global list (SillyTavern's wire shape or models)."""
    models = [
        s if isinstance(s, RegexScript) else RegexScript.model_validate(dict(s)) for s in scripts
    ]
    return ScriptsBridge(ScriptLists(global_scripts=models), store_toggle=store_toggle)
