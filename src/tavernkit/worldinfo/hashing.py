"""SillyTavern's entry hash: cyrb53 over ``JSON.stringify`` of the entry.

Timed effects (sticky, cooldown) are stored in chat metadata under the hash of the entry's JSON,
so a chat moved between SillyTavern and tavernkit keeps its timers only if the hash is
reproduced exactly: JS key order (integer-like keys first), no spaces, non-ASCII kept, JS number
formatting, and the hash taken over UTF-16 code units.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tavernkit.worldinfo._js import js_key_order, js_number_to_string

__all__ = ["cyrb53", "entry_hash", "hash_payload", "js_json_stringify"]

_MASK32 = 0xFFFFFFFF

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def _quote(text: str) -> str:
    out = ['"']
    for ch in text:
        esc = _ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch < " " or "\ud800" <= ch <= "\udfff":
            # Control characters and lone surrogates (well-formed JSON.stringify, ES2019).
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def js_json_stringify(value: Any) -> str:
    """``JSON.stringify(value)`` without indentation, for JSON-compatible Python values."""
    if value is None or value is True or value is False:
        return "null" if value is None else ("true" if value else "false")
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, int | float):
        if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
            return "null"
        return js_number_to_string(value)
    if isinstance(value, Mapping):
        parts = [
            _quote(str(k)) + ":" + js_json_stringify(value[k])
            for k in js_key_order(value)
            # JSON.stringify drops undefined (here: nothing maps to undefined) and functions.
        ]
        return "{" + ",".join(parts) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(js_json_stringify(v) for v in value) + "]"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def cyrb53(text: str, seed: int = 0) -> int:
    """SillyTavern's ``getStringHash``: cyrb53 over UTF-16 code units, a 53-bit integer."""
    h1 = (0xDEADBEEF ^ seed) & _MASK32
    h2 = (0x41C6CE57 ^ seed) & _MASK32
    data = text.encode("utf-16-le", "surrogatepass")
    for i in range(0, len(data), 2):
        ch = data[i] | (data[i + 1] << 8)
        h1 = ((h1 ^ ch) * 2654435761) & _MASK32
        h2 = ((h2 ^ ch) * 1597334677) & _MASK32
    h1 = ((h1 ^ (h1 >> 16)) * 2246822507) & _MASK32
    h1 ^= ((h2 ^ (h2 >> 13)) * 3266489909) & _MASK32
    h2 = ((h2 ^ (h2 >> 16)) * 2246822507) & _MASK32
    h2 ^= ((h1 ^ (h1 >> 13)) * 3266489909) & _MASK32
    return 4294967296 * (2097151 & h2) + (h1 & _MASK32)


def hash_payload(
    entry: Mapping[str, Any], world: str, decorators: list[str], content: str
) -> dict[str, Any]:
    """The object SillyTavern hashes: ``{uid, world, ...rest}`` with ``content`` replaced by
    the decorator-stripped text in place and ``decorators`` set (appended when new)."""
    payload: dict[str, Any] = {}
    if "uid" in entry:
        payload["uid"] = entry["uid"]
    payload["world"] = world
    for key in js_key_order(entry):
        if key != "uid":
            payload[key] = entry[key]
    payload["decorators"] = list(decorators)
    payload["content"] = content
    return payload


def entry_hash(entry: Mapping[str, Any], world: str, decorators: list[str], content: str) -> int:
    return cyrb53(js_json_stringify(hash_payload(entry, world, decorators, content)))
