"""JavaScript values as ChatLuna's evaluator sees them: coercions and operators.

ChatLuna evaluates template expressions with plain JavaScript on the variables object, so a
template can reach more than the values it was given: ``{items.length}`` counts UTF-16 units,
``{name.toUpperCase}`` calls the string method (a member that is a function is called with no
arguments), ``{nums.reverse}`` reverses the caller's array in place, and a bare name that is
not a variable is looked up on ``Object.prototype`` (``{constructor}`` prints
``[object Object]``, ``{toString}`` prints ``[object Undefined]``). This module models those
values: Python ``None`` is ``null``, :data:`UNDEFINED` is ``undefined``, lists are arrays,
mappings are plain objects, and the built-in methods a no-argument call can reach are
:class:`JsFunction` objects (their table is :mod:`.chatluna_js_properties`). A method that
would throw a ``TypeError`` or ``RangeError`` in JavaScript raises ``TypeError`` or
``ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from tavernkit.jscompat import (
    js_number_to_string,
    js_strict_eq,
    js_to_number,
    js_truthy,
)

__all__ = [
    "UNDEFINED",
    "JsFunction",
    "add",
    "arithmetic",
    "call_function",
    "char_at",
    "compare",
    "is_function",
    "is_number",
    "strict_equal",
    "to_number",
    "to_string",
    "truthy",
    "utf16_key",
    "utf16_slice",
]


class _Undefined:
    __slots__ = ()

    def __repr__(self) -> str:
        return "undefined"

    def __bool__(self) -> bool:
        return False


UNDEFINED: Any = _Undefined()


class JsFunction:
    """A built-in JavaScript function: ``impl(this, args)``."""

    __slots__ = ("impl", "name")

    def __init__(self, name: str, impl: Callable[[Any, list[Any]], Any]) -> None:
        self.name = name
        self.impl = impl

    def __call__(self, this: Any, args: list[Any]) -> Any:
        return self.impl(this, args)

    def __repr__(self) -> str:
        return f"function {self.name}() {{ [native code] }}"


def is_function(value: Any) -> bool:
    return isinstance(value, JsFunction) or (callable(value) and not isinstance(value, type))


def call_function(value: Any, this: Any, args: list[Any]) -> Any:
    """Call a function value: a built-in with ``this``, a Python callable with the args."""
    if isinstance(value, JsFunction):
        return value(this, args)
    return value(*args)


# -- coercions ------------------------------------------------------------------------------------


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def to_string(value: Any) -> str:
    """``String(value)``."""
    if isinstance(value, str):
        return value
    if value is UNDEFINED:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if is_number(value):
        return js_number_to_string(value)
    if isinstance(value, list | tuple):
        return ",".join("" if v is None or v is UNDEFINED else to_string(v) for v in value)
    if isinstance(value, Mapping):
        return "[object Object]"
    if isinstance(value, JsFunction):
        return f"function {value.name}() {{ [native code] }}"
    if callable(value):
        return "function () { [native code] }"
    return str(value)


def to_primitive(value: Any) -> Any:
    """Objects become their string form (arrays join, plain objects ``[object Object]``)."""
    if isinstance(value, list | tuple | Mapping) or is_function(value):
        return to_string(value)
    return value


def to_number(value: Any) -> float:
    if value is UNDEFINED:
        return math.nan
    value = to_primitive(value)
    return js_to_number(value)


def truthy(value: Any) -> bool:
    if value is UNDEFINED:
        return False
    if is_function(value):
        return True
    return js_truthy(value)


def strict_equal(a: Any, b: Any) -> bool:
    if a is UNDEFINED or b is UNDEFINED:
        return a is b
    return js_strict_eq(a, b)


def add(a: Any, b: Any) -> Any:
    left, right = to_primitive(a), to_primitive(b)
    if isinstance(left, str) or isinstance(right, str):
        return to_string(left) + to_string(right)
    return to_number(left) + to_number(right)


def arithmetic(op: str, a: Any, b: Any) -> float:
    x, y = to_number(a), to_number(b)
    if op == "-":
        return x - y
    if op == "*":
        if (math.isinf(x) and y == 0) or (math.isinf(y) and x == 0):
            return math.nan
        return x * y
    if op == "/":
        if y != 0:
            return x / y
        if x == 0 or x != x:
            return math.nan
        return math.copysign(math.inf, x) * math.copysign(1.0, y)
    # % : the sign of the dividend, NaN for a zero divisor or an infinite dividend
    if y == 0 or x != x or y != y or math.isinf(x):
        return math.nan
    if math.isinf(y):
        return x
    return math.fmod(x, y)


def compare(op: str, a: Any, b: Any) -> bool:
    left, right = to_primitive(a), to_primitive(b)
    if isinstance(left, str) and isinstance(right, str):
        x: Any = utf16_key(left)
        y: Any = utf16_key(right)
    else:
        x, y = to_number(left), to_number(right)
        if x != x or y != y:
            return False
    if op == "<":
        return bool(x < y)
    if op == ">":
        return bool(x > y)
    if op == "<=":
        return bool(x <= y)
    return bool(x >= y)


def utf16_key(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def utf16_slice(text: str, start: int, end: int | None = None) -> str:
    """``text.substring``-style slice by UTF-16 units (a cut surrogate pair is dropped)."""
    if text.isascii():
        return text[start:end]
    data = text.encode("utf-16-le", "surrogatepass")
    cut = data[start * 2 : None if end is None else end * 2]
    return cut.decode("utf-16-le", "surrogatepass")  # a cut pair leaves a lone half, as in JS


def char_at(text: str, index: int) -> str:
    return utf16_slice(text, index, index + 1)


# -- properties -----------------------------------------------------------------------------------
