"""What happens to macro results and to the rendered text: SillyTavern's normalisation of
values (``None`` → ``""``, numbers as JavaScript prints them, lists and objects as JSON) and its
post-processing (``\\{``/``\\}`` unescaped, bare ``{{trim}}`` removed with its newlines, stray
``{{else}}`` markers dropped), plus the trim/dedent of scoped block content."""

from __future__ import annotations

import re

from tavernkit.jscompat import (
    JS_WHITESPACE,
    is_false_boolean,
    js_json_stringify,
    js_string,
    js_trim,
    js_truthy,
)

__all__ = ["ELSE_MARKER", "is_falsy", "normalize_result", "postprocess", "trim_scoped"]

ELSE_MARKER = "\u0000\u001fELSE\u001f\u0000"
_UNESCAPE = re.compile(r"\\([{}])")
# ASCII case variants only, as JavaScript's /i without the u flag; spelled out rather than
# re.IGNORECASE, which turns off the engine's fast scan for the literal "{{" prefix.
_TRIM = re.compile(r"\{\{[tT][rR][iI][mM]\}\}")
_SPACE_TAB = " \t"


def normalize_result(value: object) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, list | dict):
        return js_json_stringify(value)
    return js_string(value)


def postprocess(text: str) -> str:
    if "\\" in text:
        text = _UNESCAPE.sub(r"\1", text)
    if "{{" in text:
        text = _remove_bare_trim(text)
    if "\x00" in text:
        text = text.replace(ELSE_MARKER, "")
    return text


def _remove_bare_trim(text: str) -> str:
    """Remove each ``{{trim}}`` with the newlines (``\n`` or ``\r\n``) on both sides of it.

    Same result as SillyTavern's ``/(?:\r?\n)*{{trim}}(?:\r?\n)*/gi``, without that pattern's
    cost of trying the leading newline loop at every position of a long text.
    """
    match = _TRIM.search(text)
    if match is None:
        return text
    out: list[str] = []
    cursor = 0
    while match is not None:
        start, end = match.start(), match.end()
        while start > cursor and text[start - 1] == "\n":
            start -= 1
            if start > cursor and text[start - 1] == "\r":
                start -= 1
        while True:
            if text.startswith("\n", end):
                end += 1
            elif text.startswith("\r\n", end):
                end += 2
            else:
                break
        out.append(text[cursor:start])
        cursor = end
        match = _TRIM.search(text, end)
    out.append(text[cursor:])
    return "".join(out)


def trim_scoped(content: str) -> str:
    """Trim block content and remove the indentation of its first non-blank line from all."""
    if not content:
        return ""
    lines = content.split("\n")
    base = 0
    for line in lines:
        if js_trim(line):
            base = len(line) - len(line.lstrip(_SPACE_TAB))
            break
    if base == 0:
        return js_trim(content)
    out = []
    for line in lines:
        indent = len(line) - len(line.lstrip(_SPACE_TAB))
        out.append(line[base:] if indent >= base else line.lstrip(JS_WHITESPACE))
    return js_trim("\n".join(out))


def is_falsy(value: object) -> bool:
    return not js_truthy(value) or is_false_boolean(normalize_result(value))
