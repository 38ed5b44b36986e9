"""A tiny macro substitute for the golden scenarios, used until the real macro engine is wired.

It covers exactly the macros the world-info goldens use: ``{{char}}``, ``{{user}}``,
``{{noop}}``, ``{{newline}}``, ``{{trim}}``, ``{{// comment}}``, ``{{random::a::b}}`` with one
option, ``{{reverse::text}}``, ``{{setvar::name::value}}`` and ``{{getvar::name}}`` (one
variable scope per scenario). Unknown macros are left as they are.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_MACRO = re.compile(r"\{\{(.*?)\}\}", re.S)


def mini_substitute(char: str, user: str) -> Callable[[str], str]:
    variables: dict[str, str] = {}

    def one(match: re.Match[str]) -> str:
        body = match.group(1)
        name, _, rest = body.partition("::")
        low = name.strip().lower()
        if low == "char":
            return char
        if low == "user":
            return user
        if low in ("noop", "trim") or body.startswith("//"):
            return "\x00TRIM\x00" if low == "trim" else ""
        if low == "newline":
            return "\n"
        if low == "random":
            options = rest.split("::") if "::" in rest else rest.split(",")
            return options[0] if len(options) == 1 else match.group(0)
        if low == "reverse":
            return rest[::-1]
        if low == "setvar":
            key, _, value = rest.partition("::")
            variables[key] = value
            return ""
        if low == "getvar":
            return variables.get(rest, "")
        return match.group(0)

    def substitute(text: str) -> str:
        if "{{" not in text:
            return text
        out = _MACRO.sub(one, text)
        if "\x00TRIM\x00" in out:
            # {{trim}} removes the white space around it.
            out = re.sub(r"\s*\x00TRIM\x00\s*", "", out)
        return out

    return substitute
