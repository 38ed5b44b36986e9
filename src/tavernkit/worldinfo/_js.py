"""JavaScript value semantics that SillyTavern's world-info code relies on.

SillyTavern compares, sorts and coerces entry fields with JS rules (``==``, ``??``, ``Number()``,
truthiness, ``String.prototype.trim``). Books in the wild carry strings where numbers belong
and nulls where booleans belong, so matching SillyTavern entry for entry means applying the
same coercions here instead of Python's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "JS_WHITESPACE",
    "is_array_index",
    "js_key_order",
    "js_loose_true",
    "js_lower",
    "js_number",
    "js_number_to_string",
    "js_round",
    "js_strict_eq",
    "js_string",
    "js_trim",
    "js_truthy",
]

#: Characters JS ``\s`` and ``trim()`` treat as white space (WhiteSpace + LineTerminator).
JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)

_JS_NUMBER_RE = re.compile(
    r"[+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+)"
)


def js_trim(text: str) -> str:
    """``String.prototype.trim``: Python's ``strip()`` has a different white-space set."""
    return text.strip(JS_WHITESPACE)


def js_lower(text: str) -> str:
    """``toLowerCase``: Python's ``lower`` applies the same full Unicode mapping (incl.
    final sigma and ``İ`` -> ``i̇``); only the Unicode version can differ."""
    return text.lower()


def js_truthy(value: Any) -> bool:
    """JS truthiness: ``0``, ``NaN``, ``""``, ``null`` are false; ``[]`` and ``{}`` are true."""
    if value is None or value is False:
        return False
    if isinstance(value, bool):
        return True
    if isinstance(value, int | float):
        return not (value == 0 or (isinstance(value, float) and math.isnan(value)))
    if isinstance(value, str):
        return value != ""
    return True


def js_number(value: Any) -> float:
    """``Number(value)``: ``null`` -> 0, booleans -> 0/1, numeric strings parsed, else NaN."""
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = js_trim(value)
        if text == "":
            return 0.0
        if not _JS_NUMBER_RE.fullmatch(text):
            return math.nan
        sign = -1.0 if text.startswith("-") else 1.0
        body = text.lstrip("+-")
        if body == "Infinity":
            return sign * math.inf
        if body[:2].lower() in ("0x", "0o", "0b"):
            if text[0] in "+-":
                return math.nan  # JS rejects signed hex/octal/binary literals
            return float(int(body, 0))
        return sign * float(body)
    if isinstance(value, list):
        if not value:
            return 0.0
        if len(value) == 1:
            return js_number(js_string(value[0]))
        return math.nan
    return math.nan


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
    return js_number(value) == 1.0


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
        value = float(value)
    if math.isnan(value) or math.isinf(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value == 0:
        return "0"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
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


def js_string(value: Any) -> str:
    """``String(value)`` for JSON values (template literals such as `` `${world}.${uid}` ``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return js_number_to_string(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ",".join("" if v is None else js_string(v) for v in value)
    return "[object Object]"


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
    index_keys = [k for k in keys if is_array_index(k)]
    if not index_keys:
        return keys
    index_keys.sort(key=int)
    return index_keys + [k for k in keys if not is_array_index(k)]


def js_ordered_items(mapping: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [(k, mapping[k]) for k in js_key_order(mapping)]
