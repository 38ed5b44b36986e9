"""Entry decorators: leading ``@@activate`` / ``@@dont_activate`` lines of an entry's content.

Only content that starts with ``@@`` is parsed. Leading ``@@`` lines are decorators; ``@@@x`` is
an escaped fallback used only right after an unknown decorator line. Parsing stops at the first
other line, and the content becomes the rest.
"""

from __future__ import annotations

__all__ = ["KNOWN_DECORATORS", "parse_decorators"]

KNOWN_DECORATORS = ("@@activate", "@@dont_activate")


def _is_known(line: str) -> bool:
    if line.startswith("@@@"):
        line = line[1:]
    return line.startswith(KNOWN_DECORATORS)


def parse_decorators(content: str, *, compat: bool = True) -> tuple[list[str], str]:
    """``(decorators, content)``.

    SillyTavern returns the content unchanged (decorator lines included) when every line is a
    decorator line; ``compat=False`` returns an empty content then instead. The entry hash is
    always computed from the SillyTavern result, so timers stay portable.
    """
    if not content.startswith("@@"):
        return [], content
    lines = content.split("\n")
    decorators: list[str] = []
    fallbacked = False
    for i, line in enumerate(lines):
        if not line.startswith("@@"):
            return decorators, "\n".join(lines[i:])
        if line.startswith("@@@") and not fallbacked:
            continue
        if _is_known(line):
            decorators.append(line[1:] if line.startswith("@@@") else line)
            fallbacked = False
        else:
            fallbacked = True
    return decorators, (content if compat else "")
