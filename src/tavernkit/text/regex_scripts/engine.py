"""The Regex extension's engine: which scripts run for a call, and what one script does.

:func:`run_scripts` is SillyTavern's ``getRegexedString(text, placement, params)``, rule for
rule (reference A4): the only-flags (``markdownOnly`` runs on display calls, ``promptOnly`` on
prompt calls, a script with neither only on calls with neither: what is stored), ``runOnEdit``
for edits, the depth window (checked only when a numeric depth is given, with JavaScript's
coercions of the stored values), the placement (``Array.includes``: strict), then
:func:`run_script` (``runRegexScript``): the find pattern macro-substituted by its
``substituteRegex`` mode, compiled as ``regexFromString`` does, and the replacement built
per match — ``{{match}}`` is ``$0``, ``$N`` and ``$<name>`` read the arguments JavaScript passes
``replace``'s callback (so ``$N`` past the last group reads the offset, then the input), each
inserted value loses its ``trimStrings``, and the whole replacement goes through the macros.

Macros come in through :class:`RegexMacros` (the caller's evaluator), so the engine is pure.
A script object that SillyTavern would trip over (no ``replaceString``, no ``trimStrings`` when
a group is inserted, a non-list ``placement``) raises :class:`RegexScriptError`, the
``TypeError`` SillyTavern's call throws.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypedDict, Unpack

from tavernkit.errors import RegexScriptError as RegexScriptError
from tavernkit.jscompat import js_strict_eq, js_string, js_to_number, js_truthy
from tavernkit.models.regex_script import RegexScript
from tavernkit.text.regex_scripts.guard import ScriptRegexGuard
from tavernkit.text.regex_scripts.js_regex import (
    JsMatch,
    find_matches,
    rebuild,
    regex_from_string,
)

__all__ = [
    "RegexMacros",
    "RegexPlacement",
    "RegexRunOptions",
    "RegexScriptError",
    "ScriptView",
    "filter_string",
    "plain_macros",
    "run_script",
    "run_scripts",
    "sanitize_regex_macro",
    "script_view",
]


log = logging.getLogger("tavernkit.text.regex_scripts")


class RegexPlacement(IntEnum):
    """``regex_placement``: where a script applies (0 and 4 are legacy values)."""

    MD_DISPLAY = 0
    USER_INPUT = 1
    AI_OUTPUT = 2
    SLASH_COMMAND = 3
    SENDAS = 4
    WORLD_INFO = 5
    REASONING = 6


class SubstituteMode(IntEnum):
    """``substitute_find_regex``: macros in the find pattern."""

    NONE = 0
    RAW = 1
    ESCAPED = 2


@dataclass(frozen=True, slots=True)
class RegexMacros:
    """The macro evaluator the scripts use (SillyTavern's ``substituteParams``).

    ``plain`` evaluates a text; ``escaped`` evaluates with every macro's value regex-escaped
    (:func:`sanitize_regex_macro`, the ``ESCAPED`` find mode); ``for_character`` evaluates
    with ``{{char}}`` as the given name (trim strings under a ``characterOverride``).
    """

    plain: Callable[[str], str]
    escaped: Callable[[str], str] | None = None
    for_character: Callable[[str, str], str] | None = None


def plain_macros(substitute: Callable[[str], str] | None = None) -> RegexMacros:
    """Macros through one callable (identity by default: no macro is expanded)."""
    return RegexMacros(substitute if substitute is not None else (lambda text: text))


_REGEX_SPECIALS = re.compile(r"[\n\r\t\v\f\0.^$*+?{}\[\]\\/|()]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v", "\f": "\\f", "\0": "\\0"}


def sanitize_regex_macro(value: str) -> str:
    """``sanitizeRegexMacro``: a macro's value made literal for a regex (control characters
    as escapes, every regex special character backslashed)."""
    if not value:
        return value
    return _REGEX_SPECIALS.sub(lambda m: _ESCAPES.get(m.group(), "\\" + m.group()), value)


@dataclass(frozen=True, slots=True)
class ScriptView:
    """A script's wire values as the engine reads them (``missing`` lists the keys it lacks,
    which SillyTavern reads as ``undefined``)."""

    script: RegexScript
    data: Mapping[str, Any]

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def has(self, key: str) -> bool:
        return key in self.data

    @property
    def name(self) -> str:
        return js_string(self.data.get("scriptName", ""))


def script_view(script: RegexScript | Mapping[str, Any]) -> ScriptView:
    """The engine's view of a script (a model or its JSON object)."""
    if isinstance(script, RegexScript):
        return ScriptView(script, script.to_wire())
    data = dict(script)
    return ScriptView(RegexScript.model_validate(data), data)


def _number_or_none(value: Any) -> float | None:
    """A stored depth as the depth check reads it: ``None`` for ``undefined``/``null``/``NaN``
    (``isNaN`` after ``Number()``), else its numeric value."""
    if value is None:
        return None
    number = js_to_number(value)
    return None if math.isnan(number) else number


def _depth_allows(view: ScriptView, depth: Any) -> bool:
    if isinstance(depth, bool) or not isinstance(depth, int | float):
        return True  # only a number enables the check (a string depth does not)
    min_depth = _number_or_none(view.get("minDepth"))
    if min_depth is not None and min_depth >= -1 and depth < min_depth:
        return False
    max_depth = _number_or_none(view.get("maxDepth"))
    return not (max_depth is not None and max_depth >= 0 and depth > max_depth)


def _placement_includes(view: ScriptView, placement: Any) -> bool:
    placements = view.get("placement")
    if isinstance(placements, list):
        return any(js_strict_eq(p, placement) for p in placements)
    if isinstance(placements, str):  # String.prototype.includes: the argument as a string
        return js_string(placement) in placements
    raise RegexScriptError(_type_error(placements, view.has("placement"), "includes"))


def _type_error(value: Any, present: bool, method: str) -> str:
    """The message of the ``TypeError`` JavaScript throws calling ``method`` on ``value``."""
    if not present or value is None:
        return (
            f"Cannot read properties of {'null' if present else 'undefined'} (reading '{method}')"
        )
    return f"{method} is not a function"


def _selected(view: ScriptView, *, markdown: bool, prompt: bool, edit: bool, depth: Any) -> bool:
    md_only = js_truthy(view.get("markdownOnly"))
    prompt_only = js_truthy(view.get("promptOnly"))
    if not (
        (md_only and markdown)
        or (prompt_only and prompt)
        or (not md_only and not prompt_only and not markdown and not prompt)
    ):
        return False
    if edit and not js_truthy(view.get("runOnEdit")):
        return False
    return _depth_allows(view, depth)


class RegexRunOptions(TypedDict, total=False):
    """:func:`run_scripts`'s keyword options (what each does: its docstring); ``guard`` runs
    the patterns, bounded (:class:`~.guard.ScriptRegexGuard`)."""

    markdown: bool
    prompt: bool
    edit: bool
    depth: Any
    character_override: str | None
    guard: ScriptRegexGuard | None
    strict: bool


def run_scripts(
    text: Any,
    placement: Any,
    scripts: Iterable[ScriptView],
    macros: RegexMacros,
    **options: Unpack[RegexRunOptions],
) -> str:
    """``getRegexedString``: ``text`` through every selected script, in order (the call's
    options: :class:`RegexRunOptions`).

    ``scripts`` is the active list (global, then preset, then character scripts: see
    :mod:`.scopes`). A text that is not a string gives ``""``; an empty text and a call without
    a placement (``None``) return the text unchanged. ``markdown``/``prompt``/``edit`` are the
    call's ``isMarkdown``/``isPrompt``/``isEdit``; ``depth`` the message depth (any value: only
    a number enables the depth window). ``character_override`` is the ``{{char}}`` of the trim
    strings (``/sendas``). ``strict`` off skips a script that SillyTavern would throw on
    (:class:`RegexScriptError`) instead of raising: one broken script then costs its own
    change, not the whole turn (the chat service's choice; the engine's default is
    SillyTavern's).
    """
    unknown = [k for k in options if k not in RegexRunOptions.__annotations__]
    if unknown:
        raise TypeError(f"run_scripts() got an unexpected keyword argument {unknown[0]!r}")
    if not isinstance(text, str):
        return ""
    if not text or placement is None:
        return text
    o = options
    markdown, prompt, edit = o.get("markdown", False), o.get("prompt", False), o.get("edit", False)
    depth, character_override = o.get("depth"), o.get("character_override")
    guard, strict = o.get("guard"), o.get("strict", True)
    out = text
    for view in scripts:
        try:
            if not _selected(view, markdown=markdown, prompt=prompt, edit=edit, depth=depth):
                continue
            if _placement_includes(view, placement):
                out = run_script(
                    view, out, macros, character_override=character_override, guard=guard
                )
        except RegexScriptError:
            if strict:
                raise
            log.warning("regex script %r skipped: its object is malformed", view.name)
    return out


def _find_string(view: ScriptView, macros: RegexMacros) -> str:
    find = view.get("findRegex")
    pattern = find if isinstance(find, str) else js_string(find)
    mode = js_to_number(view.get("substituteRegex"))
    if mode == SubstituteMode.RAW:
        return macros.plain(pattern)
    if mode == SubstituteMode.ESCAPED:
        return (macros.escaped or macros.plain)(pattern)
    return pattern  # NONE, and any other value (SillyTavern warns and uses it as is)


_MATCH_MACRO = re.compile(r"\{\{match\}\}", re.IGNORECASE)
_GROUP_REF = re.compile(r"\$(\d+)|\$<([^>]+)>")


def run_script(
    script: ScriptView | RegexScript,
    text: str,
    macros: RegexMacros,
    *,
    character_override: str | None = None,
    guard: ScriptRegexGuard | None = None,
) -> str:
    """``runRegexScript``: one script over ``text``, whatever its placement and flags (the
    ``/regex`` command's way). A disabled script, an empty find pattern or an empty text
    change nothing; neither does a pattern that does not compile or that the guard stops."""
    view = script if isinstance(script, ScriptView) else script_view(script)
    if js_truthy(view.get("disabled")) or not js_truthy(view.get("findRegex")) or not text:
        return text
    regex = regex_from_string(_find_string(view, macros))
    if regex is None:
        return text
    found = find_matches(regex, text, guard=guard)
    if found is None:
        return text
    prepared, matches = found
    if not matches:
        return text
    replacements = [
        _replacement(view, match, text, macros, character_override, regex.has_named_groups)
        for match in matches
    ]
    return rebuild(prepared, matches, replacements)


def _replacement(
    view: ScriptView,
    match: JsMatch,
    text: str,
    macros: RegexMacros,
    character_override: str | None,
    named_groups: bool,
) -> str:
    template = view.get("replaceString")
    if not isinstance(template, str):
        raise RegexScriptError(_type_error(template, view.has("replaceString"), "replace"))
    template = _MATCH_MACRO.sub("$0", template)
    # the arguments of replace's callback: match, groups..., offset, input[, named groups]
    args: list[Any] = [match.text, *match.groups, match.offset, text]
    if named_groups:
        args.append(match.named)

    def group(m: re.Match[str]) -> str:
        number, name = m.group(1), m.group(2)
        value: Any
        if number is not None:
            index = int(number)
            value = args[index] if index < len(args) else None
        else:
            last = args[-1]
            value = last.get(name) if isinstance(last, dict) else None
        if not js_truthy(value):
            return ""
        return js_string(filter_string(value, view, macros, character_override))

    return macros.plain(_GROUP_REF.sub(group, template))


def filter_string(
    value: Any, view: ScriptView, macros: RegexMacros, character_override: str | None
) -> Any:
    """``filterString``: every trim string (macro-substituted, ``{{char}}`` as the override)
    removed from an inserted value, in order."""
    trims = view.get("trimStrings")
    if not isinstance(trims, list):
        raise RegexScriptError(_type_error(trims, view.has("trimStrings"), "forEach"))
    out = value
    for trim in trims:
        trim_text = trim if isinstance(trim, str) else js_string(trim)
        if character_override is not None and macros.for_character is not None:
            trim_text = macros.for_character(trim_text, character_override)
        else:
            trim_text = macros.plain(trim_text)
        if not isinstance(out, str):
            raise RegexScriptError("finalString.replaceAll is not a function")
        if trim_text:
            out = out.replace(trim_text, "")
        else:  # replaceAll("") inserts "" between every code unit: the text is unchanged
            continue
    return out


def views(scripts: Sequence[RegexScript | Mapping[str, Any]]) -> list[ScriptView]:
    """The engine's views of a list of scripts."""
    return [script_view(s) for s in scripts]
