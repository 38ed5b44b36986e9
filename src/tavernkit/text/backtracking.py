"""A static screen for JavaScript regexes that may backtrack catastrophically: what the
world-info key scanner, the regex scripts and STscript run in a worker with a time limit
(``regress`` has no backtrack limit and holds the GIL, so a thread cannot stop it)."""

from __future__ import annotations

import re

__all__ = ["is_risky_pattern"]

_REPEAT = re.compile(r"[*+]|\{\d+,\d*\}")


def is_risky_pattern(pattern: str) -> bool:
    """A conservative pre-screen for catastrophic backtracking: a group that is repeated
    (``*``, ``+``, ``{n,}``, ``{n,m}``) and contains a quantifier or an alternation, or any
    back-reference. False positives only cost speed (the pattern runs in the worker)."""
    stack: list[bool] = []  # per open group: does it contain a quantifier or "|"
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            nxt = pattern[i + 1 : i + 2]
            if not in_class and ((nxt.isdigit() and nxt != "0") or nxt == "k"):
                return True
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
            i += 1
            continue
        if ch == "[":
            in_class = True
        elif ch == "(":
            stack.append(False)
        elif ch == ")":
            inner = stack.pop() if stack else False
            repeated = _REPEAT.match(pattern, i + 1) is not None
            if inner and repeated:
                return True
            if stack and (inner or repeated):
                stack[-1] = True
        elif ch in "*+?{|" and stack:
            stack[-1] = True
        i += 1
    return False
