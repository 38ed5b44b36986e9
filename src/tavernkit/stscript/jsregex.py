"""JavaScript regular expressions for ``/replace``, ``/test`` and ``/match``.

Patterns are ECMAScript (``regress``), read from text as SillyTavern's ``regexFromString`` does:
``/body/flags`` or a bare body (no flags); flags outside ``g m i x X s u U A J`` or repeated make
the whole text a pattern; a pattern JavaScript rejects gives None. Replacements follow
``String.prototype.replace`` (``$1``, ``$<name>``, ``$&``, ``` $` ```, ``$'``, ``$$``).

``regress`` reports UTF-8 byte offsets; they are turned back into text here. Patterns that can
backtrack catastrophically are bounded: a pattern the world-info pre-screen finds risky runs
only on inputs up to ``RISKY_INPUT_LIMIT`` characters (longer input raises
:class:`~tavernkit.errors.ScriptError`), so a hostile script cannot stall a turn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import regress

from tavernkit.errors import ScriptError
from tavernkit.worldinfo.regex_keys import is_risky_pattern

__all__ = [
    "ScriptMatch",
    "ScriptRegex",
    "js_replace",
    "regex_from_string",
]

_SHAPE = re.compile(r"(/?)(.+)\1([a-z]*)", re.I)
_FLAGS = re.compile(r"^(?!.*?(.).*?\1)[gmixXsuUAJ]+$")
_ENGINE_FLAGS = frozenset("imsu")
RISKY_INPUT_LIMIT = 2_000
_REPLACEMENT = re.compile(r"\$(\$|&|`|'|\d{1,2}|<[^>]*>)")


@dataclass(frozen=True, slots=True)
class ScriptMatch:
    """One match: its groups (None when a group did not take part), offsets, named groups."""

    groups: tuple[str | None, ...]
    start: int
    end: int
    named: dict[str, str | None]


@dataclass(frozen=True, slots=True)
class ScriptRegex:
    source: str
    flags: str
    compiled: Any
    names: tuple[str, ...]
    risky: bool
    group_count: int

    @property
    def is_global(self) -> bool:
        return "g" in self.flags

    def _guard(self, text: str) -> None:
        if self.risky and len(text) > RISKY_INPUT_LIMIT:
            raise ScriptError(
                f"pattern /{self.source}/ may backtrack without end; refused on an input of "
                f"{len(text)} characters (limit {RISKY_INPUT_LIMIT})"
            )

    def _convert(self, raw: Any, data: bytes, text: str) -> ScriptMatch:
        def piece(span: slice | None) -> str | None:
            if span is None:
                return None
            return data[span.start : span.stop].decode("utf-8")

        whole = raw.range()
        groups = tuple(piece(raw.group(i)) for i in range(self.group_count + 1))
        start = len(data[: whole.start].decode("utf-8"))
        end = start + len(groups[0] or "")
        named = {name: piece(raw.named_group(name)) for name in self.names}
        return ScriptMatch(groups, start, end, named)

    def find(self, text: str) -> ScriptMatch | None:
        self._guard(text)
        data = text.encode("utf-8", "surrogatepass")
        raw = self.compiled.find(text)
        return self._convert(raw, data, text) if raw is not None else None

    def find_all(self, text: str) -> list[ScriptMatch]:
        self._guard(text)
        data = text.encode("utf-8", "surrogatepass")
        return [self._convert(m, data, text) for m in self.compiled.find_iter(text)]


def _compile(pattern: str, flags: str) -> ScriptRegex | None:
    if any(f not in "gimsuyd" for f in flags) or len(set(flags)) != len(flags):
        return None
    engine = "".join(f for f in flags if f in _ENGINE_FLAGS)
    try:
        compiled = regress.Regex(pattern, engine or None)
    except Exception:
        return None
    names = tuple(re.findall(r"\(\?<([A-Za-z_$][\w$]*)>", pattern))
    return ScriptRegex(
        pattern, flags, compiled, names, is_risky_pattern(pattern), _count_groups(pattern)
    )


def _count_groups(pattern: str) -> int:
    """Capturing groups of an ECMAScript pattern (escapes and classes skipped)."""
    count = 0
    i = 0
    in_class = False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            rest = pattern[i + 1 : i + 3]
            if not rest.startswith("?") or (rest == "?<" and pattern[i + 3 : i + 4] not in "=!"):
                count += 1
        i += 1
    return count


def regex_from_string(text: str) -> ScriptRegex | None:
    """``regexFromString``: the regex ``text`` denotes, or None when JavaScript rejects it."""
    match = _SHAPE.match(text)
    if match is None:
        return None
    body, flags = match.group(2), match.group(3)
    if flags and not _FLAGS.match(flags):
        return _compile(text, "")
    return _compile(body, flags)


def _expand(template: str, found: ScriptMatch, text: str) -> str:
    def one(m: re.Match[str]) -> str:
        token = m.group(1)
        if token == "$":
            return "$"
        if token == "&":
            return found.groups[0] or ""
        if token == "`":
            return text[: found.start]
        if token == "'":
            return text[found.end :]
        if token.startswith("<"):
            if not found.named:
                return m.group(0)
            return found.named.get(token[1:-1]) or ""
        count = len(found.groups) - 1
        number = int(token)
        if 1 <= number <= count:
            return found.groups[number] or ""
        if len(token) == 2 and 1 <= int(token[0]) <= count:
            return (found.groups[int(token[0])] or "") + token[1]
        return m.group(0)

    return _REPLACEMENT.sub(one, template)


def js_replace(text: str, regex: ScriptRegex, replacement: str) -> str:
    """``text.replace(regex, replacement)``: every match with ``g``, else the first."""
    matches = regex.find_all(text) if regex.is_global else []
    if not regex.is_global:
        first = regex.find(text)
        matches = [first] if first is not None else []
    out: list[str] = []
    cursor = 0
    for found in matches:
        out.append(text[cursor : found.start])
        out.append(_expand(replacement, found, text))
        cursor = found.end
    out.append(text[cursor:])
    return "".join(out)


def literal_replace_all(text: str, pattern: str, replacement: str) -> str:
    """``text.replaceAll(pattern, replacement)`` with a string pattern (``$&`` … still work)."""
    if "$" not in replacement:
        if pattern == "":
            return replacement + replacement.join(text) + replacement if text else replacement
        return text.replace(pattern, replacement)
    out: list[str] = []
    cursor = 0
    step = max(len(pattern), 1)
    position = text.find(pattern) if pattern else 0
    while position != -1 and position <= len(text):
        found = ScriptMatch((pattern,), position, position + len(pattern), {})
        out.append(text[cursor:position])
        out.append(_expand(replacement, found, text))
        cursor = position + len(pattern)
        if pattern:
            position = text.find(pattern, cursor)
        else:
            out.append(text[position : position + 1])
            cursor = position + 1
            position = position + step if position < len(text) else -1
    out.append(text[cursor:])
    return "".join(out)
