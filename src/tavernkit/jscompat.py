"""JavaScript value semantics that SillyTavern-compatible processing depends on.

SillyTavern compares, coerces, prints and hashes values with JavaScript's rules, and those
differ from Python's in ways that change outputs: ``Number(" 5 ")`` is 5 and ``Number("")``
is 0, ``String(3.0)`` is ``"3"`` and ``String(1e-7)`` is ``"1e-7"``, ``trim()`` has its own
white-space set, ``Math.round`` rounds halves up, objects enumerate integer-like keys first, and
``getStringHash`` runs cyrb53 over UTF-16 code units. Books, presets and variables in the wild
carry strings where numbers belong and nulls where booleans belong, so matching SillyTavern
value for value means applying the same coercions. This is the one module that knows them; it
sits at the bottom of the package (standard library only) so every layer can use it.
"""

from __future__ import annotations

import math
import re
import sys
from array import array
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "JS_WHITESPACE",
    "cyrb53",
    "has_astral",
    "is_array_index",
    "is_false_boolean",
    "is_true_boolean",
    "js_json_stringify",
    "js_key_order",
    "js_loose_true",
    "js_lower",
    "js_number_to_string",
    "js_ordered_items",
    "js_round",
    "js_strict_eq",
    "js_string",
    "js_to_number",
    "js_trim",
    "js_trim_end",
    "js_trim_start",
    "js_truthy",
    "normalize_number",
    "utf16_len",
    "utf16_units",
]

#: What ``String.prototype.trim`` and ``\s`` treat as white space (WhiteSpace + LineTerminator
#: of ECMAScript); unlike ``str.strip`` it keeps U+001C..U+001F and U+0085 and removes U+FEFF.
JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)

_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)")
# JS rejects signed hex/octal/binary literals, so the radix form has no sign.
_RADIX = re.compile(r"0([xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_MASK32 = 0xFFFFFFFF


# --- strings ---------------------------------------------------------------------------------


def js_trim(text: str) -> str:
    return text.strip(JS_WHITESPACE)


def js_trim_start(text: str) -> str:
    return text.lstrip(JS_WHITESPACE)


def js_trim_end(text: str) -> str:
    return text.rstrip(JS_WHITESPACE)


def js_lower(text: str) -> str:
    """``toLowerCase``: Python's ``lower`` applies the same full Unicode mapping (incl.
    final sigma and ``İ`` -> ``i̇``); only the Unicode version can differ."""
    return text.lower()


def is_false_boolean(text: str) -> bool:
    """SillyTavern's ``isFalseBoolean``: ``off``/``false``/``0`` after trim, any case."""
    return js_trim(text).lower() in ("off", "false", "0")


def is_true_boolean(text: str) -> bool:
    return js_trim(text).lower() in ("on", "true", "1")


def utf16_units(text: str) -> bytes | list[int]:
    """``text`` as UTF-16 code units (what JavaScript string indexing and hashing see)."""
    # bytes and lists yield ready-made ints; iterating an array boxes each unit anew, which
    # made hashing a non-ASCII template about twice as slow.
    if text.isascii():
        return text.encode("ascii")
    units = array("H", text.encode("utf-16-le", "surrogatepass"))
    if sys.byteorder == "big":  # pragma: no cover - the encoding above is little-endian
        units.byteswap()
    return units.tolist()


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (JavaScript string offsets)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def has_astral(text: str) -> bool:
    """Whether some character takes two UTF-16 code units (offsets then differ from JS)."""
    return not text.isascii() and _ASTRAL.search(text) is not None


# --- numbers ---------------------------------------------------------------------------------


def normalize_number(value: float) -> int | float:
    """JS has one number type; keep integral values as ``int`` so JSON shows ``3``, not ``3.0``."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def js_to_number(value: Any) -> float:
    """``Number(value)``: ``null`` -> 0, booleans -> 0/1, numeric strings parsed, arrays through
    their string form, anything else NaN (never raises)."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    if value is None:
        return 0.0
    if isinstance(value, list):
        return js_to_number(js_string(value))
    if not isinstance(value, str):
        return math.nan
    if value.isdigit() and value.isascii():
        return float(value)  # the common case (variables hold digit strings), without a regex
    text = js_trim(value)
    if not text:
        return 0.0
    if _DECIMAL.fullmatch(text):
        return float(text)
    radix = _RADIX.fullmatch(text)
    if radix:
        base = {"x": 16, "o": 8, "b": 2}[radix.group(1)[0].lower()]
        return float(int(radix.group(1)[1:], base))
    if text in ("Infinity", "+Infinity"):
        return math.inf
    if text == "-Infinity":
        return -math.inf
    return math.nan


def js_round(value: float) -> float:
    """``Math.round``: halves round toward +infinity (Python's ``round`` rounds to even)."""
    if math.isnan(value) or math.isinf(value):
        return value
    return float(math.floor(value + 0.5))


def js_number_to_string(value: float | int) -> str:
    """``Number.prototype.toString()`` / ``JSON.stringify`` of a number."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if abs(value) < 2**53:
            return str(value)
        value = float(value)  # a JS number cannot hold it exactly; print what JS would hold
    if math.isnan(value) or math.isinf(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value == 0:
        return "0"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))  # exact; larger ones print their shortest digits and zeros
    digits, exponent = _shortest_digits(abs(value))
    sign = "-" if value < 0 else ""
    k = len(digits)
    n = exponent  # value = 0.digits * 10**n
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    exp = n - 1
    exp_text = f"+{exp}" if exp >= 0 else str(exp)
    if k == 1:
        return f"{sign}{digits}e{exp_text}"
    return f"{sign}{digits[0]}.{digits[1:]}e{exp_text}"


def _shortest_digits(value: float) -> tuple[str, int]:
    """The shortest round-trip decimal digits of ``value`` and its decimal exponent ``n``
    such that ``value = 0.DIGITS * 10**n`` (repr gives the same shortest digits as V8)."""
    mantissa, _, exp_part = repr(value).partition("e")
    exp = int(exp_part) if exp_part else 0
    int_part, _, frac_part = mantissa.partition(".")
    if frac_part == "0":
        frac_part = ""
    digits = (int_part + frac_part).lstrip("0")
    lead_zeros = len(int_part + frac_part) - len((int_part + frac_part).lstrip("0"))
    n = len(int_part) + exp - lead_zeros
    digits = digits.rstrip("0") or "0"
    return digits, n


# --- values ----------------------------------------------------------------------------------


def js_string(value: Any) -> str:
    """``String(value)`` for JSON values (``null`` prints as ``"null"``; array items that are
    null print as nothing, as ``Array.prototype.join`` does)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return js_number_to_string(value)
    if isinstance(value, list):
        return ",".join("" if v is None else js_string(v) for v in value)
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)


def js_truthy(value: Any) -> bool:
    """JS truthiness: ``0``, ``NaN``, ``""``, ``null`` are false; ``[]`` and ``{}`` are true."""
    if value is None or value is False:
        return False
    if value is True:
        return True
    if isinstance(value, float):
        return value == value and value != 0.0  # NaN is the one value unequal to itself
    if isinstance(value, list | dict):
        return True
    return bool(value)


def js_strict_eq(a: Any, b: Any) -> bool:
    """``a === b`` for JSON values (numbers compare by value, booleans are not numbers)."""
    a_num = isinstance(a, int | float) and not isinstance(a, bool)
    b_num = isinstance(b, int | float) and not isinstance(b, bool)
    if a_num or b_num:
        return a_num and b_num and a == b
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if a is None or b is None:
        return a is b
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return a is b


def js_loose_true(value: Any) -> bool:
    """``value == true`` (abstract equality): true only for ``true``, ``1`` and strings or
    one-element arrays that convert to 1."""
    if value is True:
        return True
    if value is None or value is False:
        return False
    return js_to_number(value) == 1.0


# --- objects and JSON ------------------------------------------------------------------------


def is_array_index(key: str) -> bool:
    """Whether JS orders ``key`` as an integer index (canonical decimal below 2**32 - 1)."""
    if not key or not key.isdigit() or not key.isascii():
        return False
    if len(key) > 1 and key[0] == "0":
        return False
    return int(key) < 4294967295


def js_key_order(keys: Iterable[str]) -> list[str]:
    """Object property order: integer-like keys ascending, then the rest in insertion order."""
    keys = list(keys)
    if keys == list(map(str, range(len(keys)))):
        return keys  # "0", "1", ... in order (a lorebook's usual uids): already JS's order
    index_keys = [k for k in keys if is_array_index(k)]
    if not index_keys:
        return keys
    index_keys.sort(key=int)
    return index_keys + [k for k in keys if not is_array_index(k)]


def js_ordered_items(mapping: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [(k, mapping[k]) for k in js_key_order(mapping)]


_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_NEEDS_ESCAPE = re.compile('[\x00-\x1f"\\\\\ud800-\udfff]')


def _quote(text: str) -> str:
    if _NEEDS_ESCAPE.search(text) is None:
        return '"' + text + '"'
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
        if not all(isinstance(k, str) for k in value):
            value = {str(k): v for k, v in value.items()}  # JS property names are strings
        parts = [
            _quote(k) + ":" + js_json_stringify(value[k])
            for k in js_key_order(value)
            # JSON.stringify drops undefined (here: nothing maps to undefined) and functions.
        ]
        return "{" + ",".join(parts) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(js_json_stringify(v) for v in value) + "]"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def cyrb53(text: str, seed: int = 0) -> int:
    """SillyTavern's ``getStringHash``: cyrb53 over UTF-16 code units, a 53-bit integer."""
    m = _MASK32
    a, b = 2654435761, 1597334677
    h1 = (0xDEADBEEF ^ seed) & m
    h2 = (0x41C6CE57 ^ seed) & m
    units = utf16_units(text)
    # Eight code units per step, masking once: (x mod 2^32) ^ u == (x ^ u) mod 2^32 for u < 2^16
    # and multiplication commutes with the reduction, so only the final mask matters (eight
    # measured fastest: fewer steps, while the unmasked numbers stay a few hundred bits). Whole
    # templates ({{pick}}) and entry JSON (timed effects) are hashed; this loop is the hot spot.
    tail = len(units) % 8
    it = iter(units[: len(units) - tail] if tail else units)
    for u0, u1, u2, u3, u4, u5, u6, u7 in zip(it, it, it, it, it, it, it, it, strict=True):
        h1 = (
            (((((((h1 ^ u0) * a ^ u1) * a ^ u2) * a ^ u3) * a ^ u4) * a ^ u5) * a ^ u6) * a ^ u7
        ) * a & m
        h2 = (
            (((((((h2 ^ u0) * b ^ u1) * b ^ u2) * b ^ u3) * b ^ u4) * b ^ u5) * b ^ u6) * b ^ u7
        ) * b & m
    for unit in units[len(units) - tail :] if tail else ():
        h1 = ((h1 ^ unit) * a) & m
        h2 = ((h2 ^ unit) * b) & m
    h1 = (((h1 ^ (h1 >> 16)) * 2246822507) & m) ^ (((h2 ^ (h2 >> 13)) * 3266489909) & m)
    h2 = (((h2 ^ (h2 >> 16)) * 2246822507) & m) ^ (((h1 ^ (h1 >> 13)) * 3266489909) & m)
    return 4294967296 * (2097151 & h2) + h1
