"""JavaScript value semantics that SillyTavern-compatible text processing depends on.

SillyTavern stores macro variables as JavaScript values and prints them with ``String()``;
its truthiness, ``Number()`` parsing and ``trim()`` differ from Python's in ways that change
outputs (``Number(" 5 ")`` is 5, ``Number("")`` is 0, ``String(3.0)`` is ``"3"``,
``String(1e-7)`` is ``"1e-7"``). These helpers are the single place that knows them.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

__all__ = [
    "JS_WHITESPACE",
    "has_astral",
    "is_false_boolean",
    "is_true_boolean",
    "js_json_stringify",
    "js_number_to_string",
    "js_string",
    "js_to_number",
    "js_trim",
    "js_truthy",
    "normalize_number",
    "utf16_len",
]

#: Characters JavaScript's ``String.prototype.trim`` and ``\s`` treat as white space.
JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)

_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)")
_RADIX = re.compile(r"0([xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)")


def js_trim(text: str) -> str:
    return text.strip(JS_WHITESPACE)


def normalize_number(value: float) -> int | float:
    """JS has one number type; keep integral values as ``int`` so JSON shows ``3``, not ``3.0``."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def js_to_number(value: Any) -> float:
    """``Number(value)``: NaN when it is not a number (never raises)."""
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
        try:
            return float(text)
        except (ValueError, OverflowError):  # pragma: no cover - float() accepts the grammar
            return math.nan
    radix = _RADIX.fullmatch(text)
    if radix:
        base = {"x": 16, "o": 8, "b": 2}[radix.group(1)[0].lower()]
        return float(int(radix.group(1)[1:], base))
    if text in ("Infinity", "+Infinity"):
        return math.inf
    if text == "-Infinity":
        return -math.inf
    return math.nan


def js_number_to_string(value: float) -> str:
    """``String(number)`` as JavaScript prints it."""
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) < 10**21:
            return str(value)
        value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    if float(value).is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    mantissa, _, exponent = text.partition("e")
    exp = int(exponent) if exponent else None
    if exp is None:
        return text
    if -7 < exp < 21:
        return format(Decimal(text), "f")
    sign = "+" if exp > 0 else "-"
    mantissa = mantissa[:-2] if mantissa.endswith(".0") else mantissa
    return f"{mantissa}e{sign}{abs(exp)}"


def _jsonable(value: Any) -> Any:
    if isinstance(value, float):
        return normalize_number(value)
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def js_json_stringify(value: Any) -> str:
    """``JSON.stringify`` (compact, non-ASCII kept)."""
    return json.dumps(_jsonable(value), ensure_ascii=False, separators=(",", ":"))


def js_string(value: Any) -> str:
    """``String(value)`` for the values variables and macros produce."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
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
    if isinstance(value, float) and math.isnan(value):
        return False
    if isinstance(value, list | dict):
        return True
    return bool(value)


def is_false_boolean(text: str) -> bool:
    """SillyTavern's ``isFalseBoolean``: ``off``/``false``/``0`` after trim, any case."""
    return js_trim(text).lower() in ("off", "false", "0")


def is_true_boolean(text: str) -> bool:
    return js_trim(text).lower() in ("on", "true", "1")


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (JavaScript string offsets)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def has_astral(text: str) -> bool:
    """Whether some character takes two UTF-16 code units (offsets then differ from JS)."""
    return not text.isascii() and _ASTRAL.search(text) is not None
