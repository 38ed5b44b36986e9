"""Where a JSON file breaks: the line, the column and the character found there.

An import no format recognizes may simply be broken JSON (a trailing comma, a missing quote).
SillyTavern's ``JSON.parse`` refuses such a file naming the token; saying only "not a format
tavernkit can import" would send the user looking for a format problem instead of a typo.
"""

from __future__ import annotations

import json

__all__ = ["json_syntax_error"]


def json_syntax_error(data: bytes, source: str = "") -> str | None:
    """Why ``data`` is not valid JSON, as ``invalid JSON at line L, column C: …`` naming the
    offending character; ``None`` when it parses, or does not look like JSON at all (neither
    a ``.json`` name nor a ``{`` or ``[`` first)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    if not (source.lower().endswith(".json") or text.lstrip()[:1] in ("{", "[")):
        return None
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            return _jsonl_error(text)  # one value per line: a chat file (JSONL)
        return f"invalid JSON at line {exc.lineno}, column {exc.colno}: {_found(exc)}"
    except RecursionError:
        return "invalid JSON: nested too deeply"
    return None


def _jsonl_error(text: str) -> str | None:
    """The first line of a JSON-lines text that is not one JSON value (``None``: each is)."""
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            json.loads(line)
        except json.JSONDecodeError as exc:
            return f"invalid JSON at line {number}, column {exc.colno}: {_found(exc)}"
        except RecursionError:
            return f"invalid JSON at line {number}: nested too deeply"
    return None


def _found(exc: json.JSONDecodeError) -> str:
    if exc.pos >= len(exc.doc):
        return f"the file ends too early ({_lower_first(exc.msg)})"
    char = exc.doc[exc.pos]
    shown = repr(char) if char.isprintable() and not char.isspace() else f"U+{ord(char):04X}"
    return f"unexpected {shown} ({_lower_first(exc.msg)})"


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]
