"""The bound on a regex script's matching time.

JavaScript runs a script's regex without any limit, and so does ``regress`` (which also holds
the GIL, so a thread cannot interrupt it): ``/(a+)+$/`` on 30 ``a`` and a ``!`` runs for a
minute, and a ``.*x`` over a 100 KB message for seconds. A script must not stall a turn, so:

- a pattern the static screen (:func:`~.js_regex.is_risky`) finds risky (a repeated group
  holding a quantifier or alternation, or a back-reference), or any pattern over a text longer
  than :attr:`ScriptRegexGuard.in_process_chars`, runs in a worker process, and one call may take at
  most :attr:`ScriptRegexGuard.timeout_s` seconds (1 s by default; ``TAVERNKIT_REGEX_TIMEOUT``);
- a call that runs out of time is stopped (the worker is killed and restarted for the next
  one) and the script does nothing for that text, as a pattern that never finished would;
- a pattern that timed out is skipped for texts at least as long as that one, and after
  :attr:`ScriptRegexGuard.max_strikes` timeouts for every text, for the life of the process;
- everything else (the common case: short messages, patterns without nested repetition)
  runs in-process, at the full speed of ``regress``.

Each stop is logged (the pattern's length and flags, never the text) and counted
(:attr:`ScriptRegexGuard.timeouts`).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from tavernkit.text.regex_worker import RegexWorker

__all__ = ["DEFAULT_GUARD", "GuardedRegex", "MatchSpans", "ScriptRegexGuard"]

log = logging.getLogger("tavernkit.text.regex_scripts")

#: One match: the byte span of the whole match, then of each capture group (``None``: the
#: group did not take part), over the UTF-8 of the prepared text.
MatchSpans = tuple[tuple[int, int] | None, ...]

_WORKER = r"""
import json, sys, regress
cache = {}
def spans(m, n):
    out = []
    for k in range(n + 1):
        s = m.group(k)
        out.append(None if s is None else [s.start, s.stop])
    return out
for line in sys.stdin:
    req = json.loads(line)
    key = (req["p"], req["f"])
    rx = cache.get(key)
    if rx is None:
        if len(cache) > 256:
            cache.clear()
        rx = cache[key] = regress.Regex(req["p"], req["f"] or None)
    n = req["n"]
    if req["g"]:
        found = [spans(m, n) for m in rx.find_iter(req["h"])]
    else:
        m = rx.find(req["h"])
        found = [] if m is None else [spans(m, n)]
    sys.stdout.write(json.dumps(found) + "\n")
    sys.stdout.flush()
"""


class GuardedRegex(Protocol):
    """What the guard reads of a compiled pattern (``js_regex.JsRegex``)."""

    @property
    def risky(self) -> bool: ...
    @property
    def groups(self) -> int: ...
    @property
    def flags(self) -> str: ...
    @property
    def engine_pattern(self) -> str: ...
    @property
    def engine_flags(self) -> str: ...
    @property
    def unit_pattern(self) -> str | None: ...
    def compiled(self, units: bool) -> Any: ...


def _timeout_from_env() -> float:
    try:
        value = float(os.environ.get("TAVERNKIT_REGEX_TIMEOUT", "") or 1.0)
    except ValueError:
        return 1.0
    return value if value > 0 else 1.0


@dataclass
class ScriptRegexGuard:
    """Runs script regexes, bounded (see the module docstring). One guard serves a whole
    process (:data:`DEFAULT_GUARD`); it is thread-safe."""

    timeout_s: float = field(default_factory=_timeout_from_env)
    in_process_chars: int = 8_000
    max_strikes: int = 3
    timeouts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _worker: RegexWorker = field(default_factory=lambda: RegexWorker(_WORKER), repr=False)
    #: (pattern, flags) -> (shortest text length that timed out, timeouts so far)
    _struck: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict, repr=False)

    def find(
        self, regex: GuardedRegex, text: str, units: bool, every: bool
    ) -> list[MatchSpans] | None:
        """The matches of ``regex`` in ``text`` (the first, or all with ``every``); ``None``
        when the pattern was stopped or is skipped after earlier timeouts."""
        if not regex.risky and len(text) <= self.in_process_chars:
            return _find_here(regex.compiled(units), text, regex.groups, every)
        pattern = regex.unit_pattern if units and regex.unit_pattern else regex.engine_pattern
        key = (pattern, regex.engine_flags)
        struck = self._struck.get(key)
        if struck is not None and (struck[1] >= self.max_strikes or len(text) >= struck[0]):
            return None
        found = self._in_worker(pattern, regex.engine_flags, text, regex.groups, every)
        if found is None:
            self.timeouts += 1
            shortest = min(len(text), struck[0]) if struck else len(text)
            self._struck[key] = (shortest, (struck[1] if struck else 0) + 1)
            log.warning(
                "regex script stopped after %.1f s (pattern of %d characters, flags %r)",
                self.timeout_s,
                len(pattern),
                regex.flags,
            )
        return found

    def _in_worker(
        self, pattern: str, flags: str, text: str, groups: int, every: bool
    ) -> list[MatchSpans] | None:
        request = {"p": pattern, "f": flags, "h": text, "n": groups, "g": every}
        with self._lock:
            answer = self._worker.ask(request, self.timeout_s)
            if answer is None:
                return None
            try:
                return [_spans(m) for m in json.loads(answer)]
            except ValueError:
                self._worker.close()
                return None

    def close(self) -> None:
        """End the worker process, if one was started."""
        with self._lock:
            self._worker.close()


def _spans(raw: list[Any]) -> MatchSpans:
    return tuple(None if pair is None else (int(pair[0]), int(pair[1])) for pair in raw)


def _find_here(compiled: Any, text: str, groups: int, every: bool) -> list[MatchSpans]:
    def spans(m: Any) -> MatchSpans:
        out: list[tuple[int, int] | None] = []
        for k in range(groups + 1):
            s = m.group(k)
            out.append(None if s is None else (s.start, s.stop))
        return tuple(out)

    if every:
        return [spans(m) for m in compiled.find_iter(text)]
    m = compiled.find(text)
    return [] if m is None else [spans(m)]


#: The process's guard (its worker starts on the first risky call).
DEFAULT_GUARD = ScriptRegexGuard()
