"""JavaScript regular expressions as SillyTavern's Regex extension builds and runs them.

:func:`regex_from_string` is ``regexFromString``: ``/body/flags`` or a bare body, the flags
checked as SillyTavern checks them (anything else makes the *whole* string the pattern), then
compiled with ``regress`` (an ECMAScript engine), so a pattern means what it means in the
browser. :func:`find_matches` is what ``String.prototype.replace`` walks: the first match, or
every match with the ``g`` flag, each with its groups, named groups and UTF-16 offset.

Python strings are code points and ``regress`` takes UTF-8, while JavaScript strings are UTF-16
code units. Without the ``u`` flag JavaScript matches code units (``.`` takes half of an emoji),
so such texts are matched in a *unit* form: every astral character becomes its two surrogates
and every surrogate a private-use character of plane 15 (U+F0000 + offset), one code point per
unit; ``\\uD83D``-style escapes and astral literals of the pattern get the same treatment. The
pieces are mapped back, and surrogate pairs joined again, when the text is rebuilt. With ``u``
only lone surrogates (which UTF-8 cannot carry) take that detour. A text that holds plane-15
private-use characters *and* lone surrogates under ``u`` may come back with the former turned
into the latter; no other text is changed by the detour.

Matching is bounded (:mod:`.guard`): JavaScript's regexes backtrack without limit, and so does
``regress``, so a risky pattern or a long text runs in a worker process with a time limit.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import regress

from tavernkit.text.backtracking import is_risky_pattern
from tavernkit.text.regex_scripts.guard import DEFAULT_GUARD, MatchSpans, ScriptRegexGuard

__all__ = [
    "JsMatch",
    "JsRegex",
    "find_matches",
    "from_units",
    "is_risky",
    "regex_from_string",
    "to_js_string",
]

#: ``regexFromString``'s parse: ``(\/?)(.+)\1([a-z]*)`` (case-insensitive, unanchored; ``.``
#: stops at JavaScript's line terminators).
_SHAPE = re.compile("(/?)([^\n\r\u2028\u2029]+)\\1([a-zA-Z]*)")
#: the flags SillyTavern lets through: no repeats, only these letters
_ST_FLAGS = frozenset("gmixXsuUAJ")
#: of those, the ones JavaScript's ``RegExp`` accepts (the rest throw: the script is a no-op)
_JS_FLAGS = frozenset("gimsu")

_UNIT_BASE = 0xF0000  # plane-15 private use: where surrogate code units are parked
_SURROGATES = re.compile("[\ud800-\udfff]")
_ASTRAL_OR_SURROGATE = re.compile("[\ud800-\udfff\U00010000-\U0010ffff]")
_PARKED = re.compile("[\U000f0000-\U000f07ff]")

#: longest pattern compiled (a longer one is treated as invalid)
MAX_PATTERN_CHARS = 100_000


def to_js_string(text: str) -> str:
    """``text`` as JavaScript holds it: surrogate pairs written as two code points joined into
    their character (a lone surrogate stays)."""
    if text.isascii() or _SURROGATES.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _park(unit: int) -> str:
    return chr(_UNIT_BASE + unit - 0xD800)


def _to_units(text: str) -> str:
    """Every UTF-16 code unit of ``text`` as one code point (surrogates parked)."""
    out = []
    for ch in text:
        cp = ord(ch)
        if cp >= 0x10000:
            cp -= 0x10000
            out.append(_park(0xD800 + (cp >> 10)))
            out.append(_park(0xDC00 + (cp & 0x3FF)))
        elif 0xD800 <= cp <= 0xDFFF:
            out.append(_park(cp))
        else:
            out.append(ch)
    return "".join(out)


def _park_lone(text: str) -> str:
    return _SURROGATES.sub(lambda m: _park(ord(m.group())), text)


def from_units(text: str) -> str:
    """The inverse of the unit form: parked surrogates back, pairs joined."""
    if text.isascii() or _PARKED.search(text) is None:
        return text
    return to_js_string(_PARKED.sub(lambda m: chr(0xD800 + ord(m.group()) - _UNIT_BASE), text))


_SURROGATE_ESCAPE = re.compile(r"\\\\|\\u([dD][89a-fA-F][0-9a-fA-F]{2})")


def _pattern_units(pattern: str) -> str:
    """A non-``u`` pattern in the unit form: astral literals split into parked units and
    ``\\uD8xx`` escapes turned into the parked unit they denote."""

    def escape(m: re.Match[str]) -> str:
        return m.group() if m.group(1) is None else _park(int(m.group(1), 16))

    if _ASTRAL_OR_SURROGATE.search(pattern):
        pattern = _to_units(pattern)
    return _SURROGATE_ESCAPE.sub(escape, pattern) if "\\u" in pattern else pattern


@dataclass(frozen=True, slots=True)
class JsRegex:
    """A compiled find pattern: the body, the flags JavaScript saw, the capture groups (count
    and names) and whether the guard treats it as risky."""

    source: str
    flags: str
    groups: int
    names: tuple[tuple[str, int], ...]
    risky: bool
    engine_pattern: str
    engine_flags: str
    unit_pattern: str | None = None  # the non-``u`` pattern in unit form, when it differs
    _compiled: dict[bool, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def is_global(self) -> bool:
        return "g" in self.flags

    @property
    def unicode(self) -> bool:
        return "u" in self.flags

    @property
    def has_named_groups(self) -> bool:
        return bool(self.names)

    def compiled(self, units: bool) -> Any:
        """The ``regress`` regex for plain text or for text in unit form."""
        found = self._compiled.get(units)
        if found is None:
            pattern = self.unit_pattern if units and self.unit_pattern else self.engine_pattern
            found = self._compiled[units] = regress.Regex(pattern, self.engine_flags or None)
        return found


@functools.lru_cache(maxsize=1000)
def regex_from_string(text: str) -> JsRegex | None:
    """SillyTavern's ``regexFromString``: the regex ``text`` denotes, or ``None`` when it does
    not compile (a script with such a pattern does nothing). Cached by the string (the last
    1000), as SillyTavern caches its compiled regexes."""
    if not text:
        return None
    match = _SHAPE.search(text)
    if match is None:
        return None
    body, flags = match.group(2), match.group(3)
    if flags and (len(set(flags)) != len(flags) or not set(flags) <= _ST_FLAGS):
        body, flags = text, ""  # SillyTavern's fallback: the whole string, no flags
    if not set(flags) <= _JS_FLAGS:
        return None  # x X U A J pass SillyTavern's check; JavaScript's RegExp throws
    return _compile(body, flags)


def _compile(body: str, flags: str) -> JsRegex | None:
    if len(body) > MAX_PATTERN_CHARS:
        return None
    engine_flags = "".join(f for f in "imsu" if f in flags)
    unicode = "u" in flags
    try:
        compiled = regress.Regex(body, engine_flags or None)
    except Exception:  # RegressError (and ValueError for input regress refuses)
        return None
    unit_pattern = None
    if not unicode:
        converted = _pattern_units(body)
        if converted != body:
            try:
                regress.Regex(converted, engine_flags or None)
            except Exception:
                return None
            unit_pattern = converted
    groups, names = _groups(body)
    regex = JsRegex(
        source=body,
        flags=flags,
        groups=groups,
        names=tuple(names),
        risky=is_risky(body),
        engine_pattern=body,
        engine_flags=engine_flags,
        unit_pattern=unit_pattern,
    )
    regex._compiled[False] = compiled
    if unit_pattern is None:
        regex._compiled[True] = compiled
    return regex


def _groups(pattern: str) -> tuple[int, list[tuple[str, int]]]:
    """The number of capture groups and the named ones (name, group number)."""
    count = 0
    names: list[tuple[str, int]] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
            i += 1
            continue
        if ch == "[":
            in_class = True
            # JavaScript: "]" right after "[" or "[^" closes the class ("[]", "[^]")
            i += 2 if pattern.startswith("[^", i) else 1
            if pattern[i : i + 1] == "]":
                in_class = False
                i += 1
            continue
        if ch == "(":
            if pattern.startswith("(?", i):
                if pattern.startswith("(?<", i) and pattern[i + 3 : i + 4] not in ("=", "!"):
                    end = pattern.find(">", i + 3)
                    count += 1
                    if end > 0:
                        names.append((pattern[i + 3 : end], count))
            else:
                count += 1
        i += 1
    return count, names


def is_risky(pattern: str) -> bool:
    """A risky pattern always runs in the guard's worker (the shared screen:
    :func:`tavernkit.text.backtracking.is_risky_pattern`); a false positive costs only speed."""
    return is_risky_pattern(pattern)


@dataclass(frozen=True, slots=True)
class JsMatch:
    """One match as ``replace`` hands it to its callback: the matched text, the capture
    groups (``None``: did not take part), the offset in UTF-16 code units and the named
    groups (``None`` when the regex has none)."""

    start: int  # in the prepared text (see :class:`_Prepared`)
    end: int
    text: str
    groups: tuple[str | None, ...]
    offset: int
    named: dict[str, str | None] | None


class _Prepared:
    """A haystack ready for ``regress``: the text (unit form where needed), its UTF-8 bytes
    and the byte -> index map for non-ASCII text."""

    __slots__ = ("_index", "data", "mapped", "text", "units")

    def __init__(self, text: str, unicode: bool) -> None:
        #: ``units``: the text is in unit form (no ``u``); ``mapped``: parked surrogates to
        #: bring back (unit form, or lone surrogates under ``u``)
        self.units = self.mapped = False
        if not text.isascii() and _ASTRAL_OR_SURROGATE.search(text):
            if not unicode:
                text, self.units, self.mapped = _to_units(text), True, True
            elif _SURROGATES.search(text):
                text, self.mapped = _park_lone(text), True
        self.text = text
        self.data = text if text.isascii() else text.encode("utf-8")
        self._index: list[int] | None = None

    def index(self, byte: int) -> int:
        if isinstance(self.data, str):
            return byte
        if self._index is None:
            table = [0] * (len(self.data) + 1)
            pos = 0
            for k, ch in enumerate(self.text):
                width = len(ch.encode("utf-8"))
                for j in range(width):
                    table[pos + j] = k
                pos += width
            table[pos] = len(self.text)
            self._index = table
        return self._index[byte]

    def piece(self, start: int, end: int) -> str:
        """Text between two indices of the prepared text, as JavaScript holds it."""
        piece = self.text[start:end]
        return from_units(piece) if self.mapped else piece

    def utf16_offset(self, index: int) -> int:
        """A prepared-text index as JavaScript counts it (UTF-16 code units)."""
        if self.units or self.text.isascii():
            return index
        prefix = self.text[:index]
        astral = sum(1 for ch in prefix if ord(ch) >= 0x10000)
        if self.mapped:
            astral -= len(_PARKED.findall(prefix))
        return index + astral


def find_matches(
    regex: JsRegex, text: str, *, guard: ScriptRegexGuard | None = None
) -> tuple[_Prepared, list[JsMatch]] | None:
    """What ``text.replace(regex, fn)`` hands ``fn``: the first match, or every match under
    ``g``, in order. ``None`` when the guard stopped the pattern (a no-op, as a pattern that
    never finished would be one)."""
    prepared = _Prepared(text, regex.unicode)
    runner = guard if guard is not None else DEFAULT_GUARD
    spans = runner.find(regex, prepared.text, prepared.units, regex.is_global)
    if spans is None:
        return None
    return prepared, [_match(regex, prepared, span) for span in spans]


def _match(regex: JsRegex, prepared: _Prepared, span: MatchSpans) -> JsMatch:
    def text_of(pair: tuple[int, int] | None) -> str | None:
        if pair is None:
            return None
        return prepared.piece(prepared.index(pair[0]), prepared.index(pair[1]))

    whole = span[0]
    assert whole is not None
    start, end = prepared.index(whole[0]), prepared.index(whole[1])
    groups = tuple(text_of(span[k]) if k < len(span) else None for k in range(1, regex.groups + 1))
    named = None
    if regex.names:
        named = {name: groups[number - 1] for name, number in regex.names}
    return JsMatch(
        start,
        end,
        prepared.piece(start, end),
        groups,
        prepared.utf16_offset(start),
        named,
    )


def rebuild(prepared: _Prepared, matches: Sequence[JsMatch], replacements: Sequence[str]) -> str:
    """The text with each match replaced (``replace``'s result)."""
    out: list[str] = []
    last = 0
    for match, replacement in zip(matches, replacements, strict=True):
        out.append(prepared.piece(last, match.start))
        out.append(replacement)
        last = match.end
    out.append(prepared.piece(last, len(prepared.text)))
    return to_js_string("".join(out))
