"""Which scripts run: the global, preset and character lists, their allow lists, and the
``/regex`` commands' lookups.

SillyTavern runs the concatenation global, preset, character (reference A2), each list in its
order, each script on the previous one's output. Preset scripts count only when the preset is
allowed and character ("scoped") scripts only when the card is allowed; the ``/regex``
commands look through all three lists whatever the allow lists say. :class:`ScriptLists`
holds the three lists and the two answers; :class:`ActiveScripts` is what a turn runs.

The command hooks (:func:`regex_command`, :func:`regex_state`, :func:`regex_toggle`) are what
an STscript executor's ``/regex``, ``/regex-state`` and ``/regex-toggle`` call: each returns
the pipe value and the notices SillyTavern shows as toasts; a toggle also returns the script
as changed and where it lives, for the caller to store.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from tavernkit.jscompat import is_false_boolean, is_true_boolean, js_truthy
from tavernkit.models.regex_script import RegexScript
from tavernkit.text.regex_scripts.engine import (
    RegexMacros,
    RegexPlacement,
    ScriptView,
    run_script,
    run_scripts,
    script_view,
)
from tavernkit.text.regex_scripts.guard import ScriptRegexGuard

__all__ = [
    "ActiveScripts",
    "CommandResult",
    "Notice",
    "ScriptLists",
    "ScriptScope",
    "regex_command",
    "regex_state",
    "regex_toggle",
    "replace_script",
]

ScriptScope = Literal["global", "preset", "scoped"]


@dataclass(frozen=True, slots=True)
class ActiveScripts:
    """The scripts a turn runs, in order (``getRegexScripts({allowedOnly: true})``); empty when
    the extension is off. :meth:`run` is ``getRegexedString`` over them."""

    views: tuple[ScriptView, ...] = ()
    guard: ScriptRegexGuard | None = None

    def __bool__(self) -> bool:
        return bool(self.views)

    def run(
        self,
        text: Any,
        placement: Any,
        macros: RegexMacros,
        *,
        markdown: bool = False,
        prompt: bool = False,
        edit: bool = False,
        depth: Any = None,
        character_override: str | None = None,
        strict: bool = False,
    ) -> str:
        """``getRegexedString`` over the active scripts (see
        :func:`~.engine.run_scripts`); a malformed script is skipped unless ``strict``."""
        return run_scripts(
            text,
            placement,
            self.views,
            macros,
            markdown=markdown,
            prompt=prompt,
            edit=edit,
            depth=depth,
            character_override=character_override,
            guard=self.guard,
            strict=strict,
        )

    def may_change(
        self, placement: RegexPlacement, *, markdown: bool = False, prompt: bool = False
    ) -> bool:
        """Whether some script could run for such a call (a cheap test that lets a build
        skip the per-message calls when no script is concerned)."""
        for view in self.views:
            md_only = js_truthy(view.get("markdownOnly"))
            prompt_only = js_truthy(view.get("promptOnly"))
            if not (
                (md_only and markdown)
                or (prompt_only and prompt)
                or (not md_only and not prompt_only and not markdown and not prompt)
            ):
                continue
            placements = view.get("placement")
            if not isinstance(placements, list) or any(
                p == placement and not isinstance(p, bool) for p in placements
            ):
                return True
        return False


@dataclass(frozen=True, slots=True)
class ScriptLists:
    """The three script lists of a moment (global, the current preset's, the current
    character's) with the allow-list answers and the extension's on/off switch."""

    global_scripts: Sequence[RegexScript] = ()
    preset_scripts: Sequence[RegexScript] = ()
    scoped_scripts: Sequence[RegexScript] = ()
    preset_allowed: bool = False
    scoped_allowed: bool = False
    enabled: bool = True
    guard: ScriptRegexGuard | None = field(default=None, compare=False)

    def by_scope(self) -> list[tuple[ScriptScope, Sequence[RegexScript]]]:
        return [
            ("global", self.global_scripts),
            ("preset", self.preset_scripts),
            ("scoped", self.scoped_scripts),
        ]

    def active(self) -> ActiveScripts:
        """The scripts that run (allowed lists only); none when the extension is off."""
        if not self.enabled:
            return ActiveScripts((), self.guard)
        scripts = list(self.global_scripts)
        if self.preset_allowed:
            scripts.extend(self.preset_scripts)
        if self.scoped_allowed:
            scripts.extend(self.scoped_scripts)
        return ActiveScripts(tuple(script_view(s) for s in scripts), self.guard)

    def find(self, name: str) -> tuple[ScriptScope, int, RegexScript] | None:
        """The first script of that name in any list (case and accents ignored)."""
        wanted = _fold(name)
        for scope, scripts in self.by_scope():
            for index, script in enumerate(scripts):
                if _fold(script.script_name) == wanted:
                    return scope, index, script
        return None


def _fold(text: Any) -> str:
    decomposed = unicodedata.normalize("NFD", str(text))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


@dataclass(frozen=True, slots=True)
class Notice:
    """What SillyTavern shows as a toast (``warning``, ``success``, ``info``, ``error``)."""

    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class CommandResult:
    """A ``/regex*`` command's pipe value and notices. A toggle carries the changed script
    (``changed``) and where it lives (``scope``, ``index``), for the caller to store."""

    output: str
    notices: tuple[Notice, ...] = ()
    changed: RegexScript | None = None
    scope: ScriptScope | None = None
    index: int | None = None


def _not_found(name: str) -> Notice:
    return Notice("warning", f'Regex script "{name}" not found.')


def regex_command(
    lists: ScriptLists, name: str | None, text: str, macros: RegexMacros
) -> CommandResult:
    """``/regex name=<script> [text]``: that one script over ``text``, whatever its placement,
    flags, depths or allow lists; a disabled or unknown script returns the text with a
    warning, as does a missing name."""
    if not name:
        return CommandResult(text, (Notice("warning", "No regex script name provided."),))
    found = lists.find(name)
    if found is None:
        return CommandResult(text, (_not_found(name),))
    script = found[2]
    if not script.enabled:
        return CommandResult(text, (Notice("warning", f'Regex script "{name}" is disabled.'),))
    return CommandResult(run_script(script_view(script), text, macros, guard=lists.guard))


def regex_state(lists: ScriptLists, name: str) -> CommandResult:
    """``/regex-state <name>``: ``"true"`` when the script is enabled, ``"false"`` when not,
    ``""`` with a warning when there is none of that name."""
    found = lists.find(name)
    if found is None:
        return CommandResult("", (_not_found(name),))
    return CommandResult("true" if found[2].enabled else "false")


def regex_toggle(
    lists: ScriptLists, name: str, *, state: str | None = None, quiet: bool = False
) -> CommandResult:
    """``/regex-toggle [state=on|off] [quiet=true] <name>``: enable, disable or flip the
    script; returns its name, the changed script and where it is (a success notice unless
    ``quiet``). The caller stores the change."""
    found = lists.find(name)
    if found is None:
        return CommandResult("", (_not_found(name),))
    scope, index, script = found
    if state is not None and is_true_boolean(state):
        disabled = False
    elif state is not None and is_false_boolean(state):
        disabled = True
    else:
        disabled = script.enabled
    changed = script.model_copy(deep=True)
    changed.disabled = disabled
    notices: tuple[Notice, ...] = ()
    if not quiet:
        word = "disabled" if disabled else "enabled"
        notices = (Notice("success", f"Regex script '{script.script_name}' has been {word}."),)
    return CommandResult(script.script_name, notices, changed, scope, index)


def replace_script(lists: ScriptLists, result: CommandResult) -> ScriptLists:
    """``lists`` with a toggle's change applied (what a caller that keeps the lists in
    memory does instead of storing it)."""
    if result.changed is None or result.scope is None or result.index is None:
        return lists
    key = {"global": "global_scripts", "preset": "preset_scripts", "scoped": "scoped_scripts"}
    current = list(getattr(lists, key[result.scope]))
    current[result.index] = result.changed
    values: Mapping[str, Any] = {key[result.scope]: current}
    return replace(lists, **values)
