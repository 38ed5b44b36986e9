"""``/pattern/flags`` keys: parsing as SillyTavern does, ECMAScript matching, and a guard.

Keys are user input and JS regexes backtrack without limit: ``(a+)+$`` on 30 ``a`` and a ``b``
runs for 40 s in both V8 and ``regress`` (which holds the GIL, so a thread cannot interrupt it).
:class:`RegexGuard` therefore runs patterns that a static pre-screen finds risky (a repeated
group that itself repeats or alternates, or a back-reference) in a worker process with a
timeout; all other patterns run in-process, compiled once. A key that times out or does not
compile is treated as not matching, with a warning that names the entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import regress

from tavernkit.text.backtracking import is_risky_pattern
from tavernkit.text.regex_worker import RegexWorker

__all__ = [
    "RegexGuard",
    "RegexKey",
    "is_risky_pattern",
    "is_segment_local",
    "parse_regex_key",
    "required_literal",
    "word_alternatives",
]

#: SillyTavern's ``parseRegexFromString`` shape (``$`` there is end-of-input only: ``\Z``).
_SHAPE = re.compile(r"\A/([\s\S]+?)/([gimsuy]*)\Z")
_UNESCAPED_SLASH = re.compile(r"(^|[^\\])/")
#: Longest pattern we compile; longer keys are treated as invalid (a pathological book).
MAX_PATTERN_CHARS = 10_000
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class RegexKey:
    """A compiled-on-demand regex key. ``sticky`` is JS ``y`` (match only at index 0)."""

    source: str
    pattern: str
    flags: str
    risky: bool
    literal: str | None = None  # a substring every match contains (a cheap pre-filter)
    #: Every match lies inside one segment of the scan text (see :func:`is_segment_local`), so
    #: the regex may be tested per message / field / recursion chunk and the answers reused.
    local: bool = False

    @property
    def engine_flags(self) -> str:
        return "".join(f for f in self.flags if f in "imsu")

    @property
    def sticky(self) -> bool:
        return "y" in self.flags


def parse_regex_key(text: str) -> RegexKey | None:
    """The regex a key denotes, or ``None`` if SillyTavern would treat the key as plain text
    (wrong shape, an unescaped ``/`` inside, repeated flags, or a pattern that does not compile
    as an ECMAScript regex)."""
    if not text.startswith("/"):
        return None
    match = _SHAPE.match(text)
    if match is None:
        return None
    pattern, flags = match.group(1), match.group(2)
    if _UNESCAPED_SLASH.search(pattern):
        return None
    if len(set(flags)) != len(flags) or len(pattern) > MAX_PATTERN_CHARS:
        return None
    pattern = pattern.replace("\\/", "/", 1)
    try:
        compiled = regress.Regex(pattern, "".join(f for f in flags if f in "imsu") or None)
    except Exception:  # regress raises RegressError (and ValueError for odd input)
        return None
    literal = required_literal(pattern)
    if literal is not None and "i" in flags:
        literal = literal.lower() if literal.isascii() else None
    risky = is_risky_pattern(pattern)
    local = (
        not risky and "y" not in flags and is_segment_local(pattern) and compiled.find("") is None
    )
    return RegexKey(text, pattern, flags, risky, literal, local)


_SPECIAL = set("\\^$.|?*+()[]{}")
_QUANT = re.compile(r"\*\??|\+\??|\?\??|\{(\d+)(,\d*)?\}\??")


def _skip_escape(pattern: str, i: int) -> int:
    """Index after the escape starting at ``pattern[i] == '\\'``."""
    nxt = pattern[i + 1 : i + 2]
    j = i + 2
    if nxt == "x":
        return j + 2
    if nxt == "u":
        if pattern[j : j + 1] == "{":
            end = pattern.find("}", j)
            return end + 1 if end != -1 else len(pattern)
        return j + 4
    if nxt == "c":
        return j + 1
    if (nxt in ("p", "P") and pattern[j : j + 1] == "{") or (
        nxt == "k" and pattern[j : j + 1] == "<"
    ):
        end = pattern.find("}" if nxt in "pP" else ">", j)
        return end + 1 if end != -1 else len(pattern)
    if nxt.isdigit():
        while j < len(pattern) and pattern[j].isdigit():
            j += 1
    return j


def _skip_class(pattern: str, i: int) -> int:
    j = i + 1
    while j < len(pattern):
        if pattern[j] == "\\":
            j += 2
            continue
        if pattern[j] == "]" and j > i + 1:
            return j + 1
        j += 1
    return len(pattern)


def _skip_group(pattern: str, i: int) -> int:
    depth = 0
    j = i
    while j < len(pattern):
        ch = pattern[j]
        if ch == "\\":
            j = _skip_escape(pattern, j)
            continue
        if ch == "[":
            j = _skip_class(pattern, j)
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return len(pattern)


def required_literal(pattern: str) -> str | None:
    """The longest run of plain characters that every match of ``pattern`` must contain, or
    ``None``. Conservative: a top-level alternation, or anything it does not understand,
    ends a run; a character made optional by its quantifier is dropped."""
    runs: list[str] = []
    run: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "|":
            return None
        if ch == "\\":
            runs.append("".join(run))
            run = []
            i = _skip_escape(pattern, i)
        elif ch == "[":
            runs.append("".join(run))
            run = []
            i = _skip_class(pattern, i)
        elif ch == "(":
            runs.append("".join(run))
            run = []
            i = _skip_group(pattern, i)
        elif ch in "*+?{":
            m = _QUANT.match(pattern, i)
            optional = ch in "*?" or (m is not None and m.group(1) == "0") or m is None
            if optional and run:
                run.pop()
            runs.append("".join(run))
            run = []
            i = m.end() if m is not None else i + 1
        elif ch in _SPECIAL:
            runs.append("".join(run))
            run = []
            i += 1
        else:
            run.append(ch)
            i += 1
    runs.append("".join(run))
    best = max(runs, key=len)
    return best if len(best) >= 2 else None


#: Most alternatives a word-shaped regex may expand to before it is left to the regex engine.
MAX_WORD_ALTERNATIVES = 256
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def word_alternatives(pattern: str, flags: str) -> frozenset[str] | None:
    """The words a ``\\b...\\b`` regex made of ASCII word characters, groups, ``|`` inside
    groups and ``?`` denotes (lowercased under ``i``), or ``None`` for any other pattern.

    For such a pattern ``regex.test(text)`` is exactly "some maximal ``[A-Za-z0-9_]`` run of
    ``text`` (ASCII-lowercased under ``i``) is one of the words": ``\\b`` on both sides of a
    non-empty word-character string means the match is a whole run, and without the ``u`` flag
    JS word characters are ASCII and ``i`` canonicalises by ``toUpperCase`` that never maps a
    non-ASCII character to an ASCII one. ``iu`` is excluded (simple case folding maps
    ``\u017f`` to ``s`` and ``\u212a`` to ``k``, and widens ``\\w``); so is ``y`` (anchored).
    ``g``, ``m`` and ``s`` change nothing here (no ``^``, ``$`` or ``.``).
    """
    if "y" in flags or ("u" in flags and "i" in flags):
        return None
    if not (pattern.startswith("\\b") and pattern.endswith("\\b")) or len(pattern) < 5:
        return None
    body = pattern[2:-2]
    parsed = _parse_words(body, 0, top=True)
    if parsed is None:
        return None
    words, end = parsed
    if end != len(body) or not words or "" in words:
        return None
    if "i" in flags:
        words = {w.lower() for w in words}
    return frozenset(words)


def _parse_words(body: str, i: int, *, top: bool) -> tuple[set[str], int] | None:
    """Parse an alternation (a single sequence at the top level) from ``body[i:]``; returns
    the set of strings it matches and the index where it stopped (at ``)`` or the end)."""
    options: set[str] = set()
    seq: set[str] = {""}
    n = len(body)
    while i < n:
        ch = body[i]
        if ch == ")":
            break
        if ch == "|":
            if top:
                return None
            options |= seq
            seq = {""}
            i += 1
            continue
        if ch in _WORD_CHARS:
            atom: set[str] = {ch}
            i += 1
        elif ch == "(":
            i += 3 if body.startswith("(?:", i) else 1
            if body.startswith("?", i):  # lookaround or named group: not handled
                return None
            inner = _parse_words(body, i, top=False)
            if inner is None:
                return None
            atom, i = inner
            if i >= n or body[i] != ")":
                return None
            i += 1
        else:
            return None
        if i < n and body[i] == "?":
            atom = atom | {""}
            i += 1
            if i < n and body[i] == "?":  # lazy: the same language
                i += 1
        if i < n and body[i] in "*+{":
            return None
        seq = {a + b for a in seq for b in atom}
        if len(seq) > MAX_WORD_ALTERNATIVES:
            return None
    options |= seq
    if len(options) > MAX_WORD_ALTERNATIVES:
        return None
    return options, i


#: Escapes that match neither ``\\n`` nor ``\\x01`` (``\\b``/``\\B`` are assertions).
_LOCAL_ESCAPES = frozenset("dwbBtrfv0")
_JOINER_CHARS = "\n\x01"


def is_segment_local(pattern: str) -> bool:
    """Whether no match of ``pattern`` can touch the ``\\n\\x01`` joiners of the scan text.

    SillyTavern tests a regex key against ``\\x01`` + the segments (messages, fields, inject,
    recursion chunks) joined by ``\\n\\x01``. When every atom of the pattern matches one
    character that is neither ``\\n`` nor ``\\x01`` (no ``.``, ``\\s``, ``\\W``, ``\\D``, ``\\S``,
    negated classes, classes or ranges holding them, numeric escapes), and its only
    assertions are ``\\b``/``\\B`` (no ``^``, ``$``, lookarounds or back-references), a match
    lies inside one segment, and the assertions see the same word/non-word neighbours there
    as in the segment alone (the joiners and the text's ends are all non-word). Together with
    "does not match the empty string" (checked by the caller) the joined text matches iff one
    segment does. Conservative: anything unrecognised is not local.
    """
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch in _JOINER_CHARS or ch in "^$.":
            return False
        if ch == "\\":
            nxt = pattern[i + 1 : i + 2]
            if nxt.isalnum() and nxt not in _LOCAL_ESCAPES:
                return False
            if nxt == "0" and pattern[i + 2 : i + 3].isdigit():
                return False
            if nxt in _JOINER_CHARS or not nxt:
                return False
            i += 2
            continue
        if ch == "(":
            if pattern.startswith("(?", i) and not pattern.startswith("(?:", i):
                return False  # lookaround or named group
            i += 3 if pattern.startswith("(?:", i) else 1
            continue
        if ch == "[":
            end = _local_class_end(pattern, i)
            if end < 0:
                return False
            i = end
            continue
        i += 1
    return True


def _local_class_end(pattern: str, i: int) -> int:
    """Index after the class at ``pattern[i] == '['`` if it cannot match a joiner, else -1."""
    j = i + 1
    if pattern[j : j + 1] in ("^", "]"):
        return -1  # negated, or JS's empty class "[]" (whose "]" would end it here)
    prev: str | None = None  # the last literal character, a possible range start
    while j < len(pattern):
        ch = pattern[j]
        if ch == "]":
            return j + 1
        if ch == "\\":
            nxt = pattern[j + 1 : j + 2]
            if (nxt.isalnum() and nxt not in "dwbtrfv") or nxt in _JOINER_CHARS or not nxt:
                return -1
            if pattern[j + 2 : j + 3] == "-" and pattern[j + 3 : j + 4] not in ("]", ""):
                return -1  # a range from an escape: not worth decoding
            prev = None
            j += 2
            continue
        if ch in _JOINER_CHARS:
            return -1
        if ch == "-" and prev is not None and pattern[j + 1 : j + 2] not in ("]", ""):
            hi = pattern[j + 1]
            if hi == "\\" or ord(prev) <= 0x0A <= ord(hi) or ord(prev) <= 0x01 <= ord(hi):
                return -1
            prev = None
            j += 2
            continue
        prev = ch
        j += 1
    return -1


def _sanitize(text: str) -> str:
    # regress takes UTF-8 and rejects lone surrogates; JS would see them as code units.
    return _SURROGATE.sub("\ufffd", text) if not text.isascii() else text


_WORKER = r"""
import json, sys, regress
cache = {}
for line in sys.stdin:
    req = json.loads(line)
    key = (req["p"], req["f"])
    rx = cache.get(key)
    if rx is None:
        rx = cache[key] = regress.Regex(req["p"], req["f"] or None)
    m = rx.find(req["h"])
    ok = m is not None and (not req["y"] or m.range().start == 0)
    sys.stdout.write("1\n" if ok else "0\n")
    sys.stdout.flush()
"""


@dataclass
class RegexGuard:
    """Runs regex keys: safe ones in-process, risky ones in a worker process with a timeout.

    One guard may serve many scans (it caches compiled patterns and keeps its worker);
    ``close()`` ends the worker. ``timeout_s`` bounds one test of a risky pattern.
    """

    timeout_s: float = 1.0
    _compiled: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)
    _timed_out: set[tuple[str, str]] = field(default_factory=set, repr=False)
    _worker: RegexWorker = field(default_factory=lambda: RegexWorker(_WORKER), repr=False)

    def test(self, key: RegexKey, haystack: str) -> bool | None:
        """``regex.test(haystack)``; ``None`` when the pattern timed out (now or before)."""
        ident = (key.pattern, key.engine_flags)
        if ident in self._timed_out:
            return None
        haystack = _sanitize(haystack)
        if not key.risky:
            rx = self._compiled.get(ident)
            if rx is None:
                rx = self._compiled[ident] = regress.Regex(key.pattern, key.engine_flags or None)
            m = rx.find(haystack)
            return m is not None and (not key.sticky or m.range().start == 0)
        result = self._run_in_worker(key, haystack)
        if result is None:
            self._timed_out.add(ident)
        return result

    def _run_in_worker(self, key: RegexKey, haystack: str) -> bool | None:
        request = {"p": key.pattern, "f": key.engine_flags, "y": key.sticky, "h": haystack}
        answer = self._worker.ask(request, self.timeout_s)
        if answer is None or answer.strip() not in ("0", "1"):
            self._worker.close()
            return None
        return answer.strip() == "1"

    def close(self) -> None:
        """End the worker process, if one was started."""
        self._worker.close()
