"""JavaScript values as ChatLuna's evaluator sees them: coercions, operators and properties.

ChatLuna evaluates template expressions with plain JavaScript on the variables object, so a
template can reach more than the values it was given: ``{items.length}`` counts UTF-16 units,
``{name.toUpperCase}`` calls the string method (a member that is a function is called with no
arguments), ``{nums.reverse}`` reverses the caller's array in place, and a bare name that is
not a variable is looked up on ``Object.prototype`` (``{constructor}`` prints
``[object Object]``, ``{toString}`` prints ``[object Undefined]``). This module models those
values: Python ``None`` is ``null``, :data:`UNDEFINED` is ``undefined``, lists are arrays,
mappings are plain objects, and the built-in methods a no-argument call can reach are
:class:`JsFunction` objects. A method that would throw a ``TypeError`` or ``RangeError`` in
JavaScript raises ``TypeError`` or ``ValueError``.
"""

from __future__ import annotations

import functools
import math
import unicodedata
from collections.abc import Callable, Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from tavernkit.jscompat import (
    js_number_to_string,
    js_strict_eq,
    js_to_number,
    js_trim,
    js_trim_end,
    js_trim_start,
    js_truthy,
    utf16_len,
)

__all__ = [
    "UNDEFINED",
    "JsFunction",
    "add",
    "arithmetic",
    "call_function",
    "compare",
    "get_property",
    "global_name",
    "is_function",
    "strict_equal",
    "to_number",
    "to_string",
    "truthy",
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


def _is_number(value: Any) -> bool:
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
    if _is_number(value):
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
        x: Any = _utf16_key(left)
        y: Any = _utf16_key(right)
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


def _utf16_key(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def utf16_slice(text: str, start: int, end: int | None = None) -> str:
    """``text.substring``-style slice by UTF-16 units (a cut surrogate pair is dropped)."""
    if text.isascii():
        return text[start:end]
    data = text.encode("utf-16-le", "surrogatepass")
    cut = data[start * 2 : None if end is None else end * 2]
    return cut.decode("utf-16-le", "surrogatepass")  # a cut pair leaves a lone half, as in JS


def _char_at(text: str, index: int) -> str:
    return utf16_slice(text, index, index + 1)


# -- properties -----------------------------------------------------------------------------------


def _this_object(this: Any) -> Any:
    if this is UNDEFINED or this is None:
        raise TypeError("Cannot convert undefined or null to object")
    return this


def _object_to_string(this: Any, args: list[Any]) -> str:
    if this is UNDEFINED:
        return "[object Undefined]"
    if this is None:
        return "[object Null]"
    if isinstance(this, list | tuple):
        return "[object Array]"
    if isinstance(this, str):
        return "[object String]"
    if isinstance(this, bool):
        return "[object Boolean]"
    if _is_number(this):
        return "[object Number]"
    if is_function(this):
        return "[object Function]"
    return "[object Object]"


def _object_constructor(this: Any, args: list[Any]) -> Any:
    value = args[0] if args else UNDEFINED
    return {} if value is None or value is UNDEFINED else value


def _is_prototype_of(this: Any, args: list[Any]) -> bool:
    value = args[0] if args else UNDEFINED
    if not isinstance(value, list | tuple | Mapping) and not is_function(value):
        return False
    _this_object(this)
    return False


def _needs_this(result: Callable[[Any], Any]) -> Callable[[Any, list[Any]], Any]:
    def method(this: Any, args: list[Any]) -> Any:
        return result(_this_object(this))

    return method


def _own_key(this: Any, key: Any) -> bool:
    name = to_string(key)
    if isinstance(this, Mapping):
        return name in this
    if isinstance(this, list | tuple | str):
        return name == "length" or (name.isdigit() and int(name) < _length(this))
    return False


def _length(value: Any) -> int:
    return utf16_len(value) if isinstance(value, str) else len(value)


#: ``Object.prototype`` as a value (it prints ``[object Object]`` and has no own names)
OBJECT_PROTOTYPE_VALUE: Mapping[str, Any] = {}


OBJECT_PROTOTYPE: dict[str, Any] = {
    "constructor": JsFunction("Object", _object_constructor),
    "toString": JsFunction("toString", _object_to_string),
    "toLocaleString": JsFunction(
        "toLocaleString", lambda this, args: to_string(_this_object(this))
    ),
    "valueOf": JsFunction("valueOf", _needs_this(lambda this: this)),
    "hasOwnProperty": JsFunction(
        "hasOwnProperty",
        lambda this, args: _own_key(_this_object(this), args[0] if args else UNDEFINED),
    ),
    "isPrototypeOf": JsFunction("isPrototypeOf", _is_prototype_of),
    "propertyIsEnumerable": JsFunction(
        "propertyIsEnumerable",
        lambda this, args: _own_key(_this_object(this), args[0] if args else UNDEFINED),
    ),
    "__defineGetter__": JsFunction("__defineGetter__", _needs_this(lambda this: UNDEFINED)),
    "__defineSetter__": JsFunction("__defineSetter__", _needs_this(lambda this: UNDEFINED)),
    "__lookupGetter__": JsFunction("__lookupGetter__", _needs_this(lambda this: UNDEFINED)),
    "__lookupSetter__": JsFunction("__lookupSetter__", _needs_this(lambda this: UNDEFINED)),
}


def _to_fixed(value: float, digits: int = 0) -> str:
    if value != value:
        return "NaN"
    if abs(value) >= 1e21 or math.isinf(value):
        return js_number_to_string(value)
    quantum = Decimal(1).scaleb(-digits)
    # the exact binary value, halves away from zero: (1.5).toFixed() is "2", (-0.4) "-0"
    return format(Decimal(value or 0.0).quantize(quantum, rounding=ROUND_HALF_UP), "f")


def _to_exponential(value: float) -> str:
    """``toExponential()``: as many digits as the number needs."""
    if value != value or math.isinf(value):
        return js_number_to_string(value)
    if value == 0:
        return "0e+0"
    _, digits, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    text = "".join(str(d) for d in digits)
    power = int(exponent) + len(text) - 1
    mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
    return f"{'-' if value < 0 else ''}{mantissa}e{'+' if power >= 0 else '-'}{abs(power)}"


def _locale_number(value: float) -> str:
    if value != value or math.isinf(value):
        return js_number_to_string(value)
    rounded = Decimal(value).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP)
    whole, _, fraction = format(abs(rounded), "f").partition(".")
    fraction = fraction.rstrip("0")
    sign = "-" if rounded < 0 else ""
    return sign + f"{int(whole):,}" + ("." + fraction if fraction else "")


def _string_method(name: str, impl: Callable[[str], Any]) -> JsFunction:
    def method(this: Any, args: list[Any]) -> Any:
        if this is UNDEFINED or this is None:
            raise TypeError(f"String.prototype.{name} called on null or undefined")
        return impl(to_string(this))

    return JsFunction(name, method)


_STRING_METHODS: dict[str, JsFunction] = {
    name: _string_method(name, impl)
    for name, impl in {
        "toUpperCase": str.upper,
        "toLowerCase": str.lower,
        "toLocaleUpperCase": str.upper,
        "toLocaleLowerCase": str.lower,
        "trim": js_trim,
        "trimStart": js_trim_start,
        "trimEnd": js_trim_end,
        "trimLeft": js_trim_start,
        "trimRight": js_trim_end,
        "toString": lambda s: s,
        "valueOf": lambda s: s,
        "toLocaleString": lambda s: s,
        "charAt": lambda s: _char_at(s, 0),
        "at": lambda s: _char_at(s, 0) if s else UNDEFINED,
        "charCodeAt": lambda s: float(ord(_char_at(s, 0))) if s else math.nan,
        "localeCompare": lambda s: _locale_compare(s, "undefined"),
        "codePointAt": lambda s: float(ord(s[0])) if s else UNDEFINED,
        "split": lambda s: [s],
        "concat": lambda s: s,
        "slice": lambda s: s,
        "substring": lambda s: s,
        "substr": lambda s: s,
        "repeat": lambda s: "",
        "normalize": lambda s: unicodedata.normalize("NFC", s),
        "padStart": lambda s: s,
        "padEnd": lambda s: s,
        "indexOf": lambda s: float(s.find("undefined")),
        "lastIndexOf": lambda s: float(s.rfind("undefined")),
        "includes": lambda s: "undefined" in s,
        "startsWith": lambda s: s.startswith("undefined"),
        "endsWith": lambda s: s.endswith("undefined"),
        "search": lambda s: 0.0,
        "isWellFormed": lambda s: True,
        "toWellFormed": lambda s: s,
    }.items()
}
_STRING_METHODS["constructor"] = JsFunction("String", lambda this, args: "")


def _html(tag: str, attribute: str, text: str) -> str:
    opening = f'{tag} {attribute}="undefined"' if attribute else tag
    return f"<{opening}>{text}</{tag}>"


# Annex B's HTML methods, with no argument (an attribute of "undefined")
for _name, (_tag, _attribute) in {
    "anchor": ("a", "name"),
    "big": ("big", ""),
    "blink": ("blink", ""),
    "bold": ("b", ""),
    "fixed": ("tt", ""),
    "fontcolor": ("font", "color"),
    "fontsize": ("font", "size"),
    "italics": ("i", ""),
    "link": ("a", "href"),
    "small": ("small", ""),
    "strike": ("strike", ""),
    "sub": ("sub", ""),
    "sup": ("sup", ""),
}.items():
    _STRING_METHODS[_name] = _string_method(_name, functools.partial(_html, _tag, _attribute))


def _locale_compare(a: str, b: str) -> float:
    """``localeCompare`` near enough to ICU's root order: letters before case."""

    def key(text: str) -> tuple[list[tuple[int, str]], str]:
        # white space and symbols, then digits, then letters; case only breaks ties
        ranks = [(2 if c.isalpha() else 1 if c.isdigit() else 0, c.casefold()) for c in text]
        return ranks, text

    key_a, key_b = key(a), key(b)
    return float((key_a > key_b) - (key_a < key_b))


class _Opaque:
    """An object whose only use in a template is its ``String()`` form (an iterator)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


def _with(items: list[Any]) -> list[Any]:
    if not items:
        raise ValueError("Invalid index : undefined")
    return [UNDEFINED, *items[1:]]


def _array_method(name: str, impl: Callable[[list[Any]], Any]) -> JsFunction:
    def method(this: Any, args: list[Any]) -> Any:
        if not isinstance(this, list):
            raise TypeError(f"Array.prototype.{name} called on a non-array")
        return impl(this)

    return JsFunction(name, method)


def _shift(items: list[Any]) -> Any:
    return items.pop(0) if items else UNDEFINED


def _pop(items: list[Any]) -> Any:
    return items.pop() if items else UNDEFINED


def _reverse(items: list[Any]) -> list[Any]:
    items.reverse()
    return items


def _sort(items: list[Any]) -> list[Any]:
    defined = [v for v in items if v is not UNDEFINED]
    defined.sort(key=lambda v: _utf16_key(to_string(v)))
    items[:] = defined + [UNDEFINED] * (len(items) - len(defined))
    return items


def _fill(items: list[Any]) -> list[Any]:
    items[:] = [UNDEFINED] * len(items)
    return items


def _flat(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        out.extend(item if isinstance(item, list) else [item])
    return out


def _needs_callback(name: str) -> JsFunction:
    def method(this: Any, args: list[Any]) -> Any:
        raise TypeError(f"undefined is not a function (Array.prototype.{name})")

    return JsFunction(name, method)


_ARRAY_METHODS: dict[str, JsFunction] = {
    name: _array_method(name, impl)
    for name, impl in {
        "join": lambda items: to_string(items),
        "toString": lambda items: to_string(items),
        "toLocaleString": lambda items: to_string(items),
        "reverse": _reverse,
        "shift": _shift,
        "pop": _pop,
        "sort": _sort,
        "fill": _fill,
        "slice": lambda items: list(items),
        "concat": lambda items: list(items),
        "flat": _flat,
        "toReversed": lambda items: list(reversed(items)),
        "toSorted": lambda items: _sort(list(items)),
        "toSpliced": lambda items: list(items),
        "splice": lambda items: [],
        "copyWithin": lambda items: items,
        "at": lambda items: items[0] if items else UNDEFINED,
        "push": lambda items: float(len(items)),
        "unshift": lambda items: float(len(items)),
        "indexOf": lambda items: -1.0 if UNDEFINED not in items else float(items.index(UNDEFINED)),
        "lastIndexOf": lambda items: -1.0,
        "includes": lambda items: UNDEFINED in items,
        "valueOf": lambda items: items,
        "keys": lambda items: _Opaque("[object Array Iterator]"),
        "values": lambda items: _Opaque("[object Array Iterator]"),
        "entries": lambda items: _Opaque("[object Array Iterator]"),
        "with": _with,
    }.items()
}
_ARRAY_METHODS["constructor"] = JsFunction("Array", lambda this, args: [])
for _name in (
    "map",
    "filter",
    "forEach",
    "every",
    "some",
    "find",
    "findIndex",
    "findLast",
    "findLastIndex",
    "reduce",
    "reduceRight",
    "flatMap",
):
    _ARRAY_METHODS[_name] = _needs_callback(_name)


def _number_method(name: str, impl: Callable[[float], Any]) -> JsFunction:
    def method(this: Any, args: list[Any]) -> Any:
        if not _is_number(this):
            raise TypeError(f"Number.prototype.{name} requires that 'this' be a Number")
        return impl(float(this))

    return JsFunction(name, method)


_NUMBER_METHODS: dict[str, JsFunction] = {
    name: _number_method(name, impl)
    for name, impl in {
        "toFixed": _to_fixed,
        "toString": js_number_to_string,
        "toPrecision": js_number_to_string,
        "toExponential": _to_exponential,
        "valueOf": lambda x: x,
        "toLocaleString": _locale_number,
    }.items()
}
_NUMBER_METHODS["constructor"] = JsFunction("Number", lambda this, args: 0.0)

_BOOLEAN_METHODS: dict[str, JsFunction] = {
    "toString": JsFunction("toString", lambda this, args: to_string(this)),
    "valueOf": JsFunction("valueOf", lambda this, args: this),
    "constructor": JsFunction("Boolean", lambda this, args: False),
}


def _index(key: Any) -> int | None:
    """The array index ``key`` names (its canonical string form is a non-negative integer)."""
    name = to_string(key)
    if name.isdigit() and (name == "0" or not name.startswith("0")) and name.isascii():
        return int(name)
    return None


def get_property(target: Any, key: Any) -> Any:
    """``target[key]`` (``target`` neither null nor undefined); :data:`UNDEFINED` if absent."""
    name = to_string(key)
    if name == "__proto__" and not isinstance(target, Mapping):
        return _prototype_value(target)
    if isinstance(target, Mapping):
        if name in target:
            return target[name]
        if name == "__proto__":
            return OBJECT_PROTOTYPE_VALUE
        return OBJECT_PROTOTYPE.get(name, UNDEFINED)
    if isinstance(target, str):
        if name == "length":
            return utf16_len(target)
        index = _index(key)
        if index is not None:
            return _char_at(target, index) if index < utf16_len(target) else UNDEFINED
        return _STRING_METHODS.get(name) or OBJECT_PROTOTYPE.get(name, UNDEFINED)
    if isinstance(target, list | tuple):
        if name == "length":
            return len(target)
        index = _index(key)
        if index is not None:
            return target[index] if index < len(target) else UNDEFINED
        return _ARRAY_METHODS.get(name) or OBJECT_PROTOTYPE.get(name, UNDEFINED)
    if isinstance(target, bool):
        return _BOOLEAN_METHODS.get(name) or OBJECT_PROTOTYPE.get(name, UNDEFINED)
    if _is_number(target):
        return _NUMBER_METHODS.get(name) or OBJECT_PROTOTYPE.get(name, UNDEFINED)
    return OBJECT_PROTOTYPE.get(name, UNDEFINED) if not is_function(target) else UNDEFINED


def _prototype_value(target: Any) -> Any:
    """What a primitive's prototype object prints like (``Number.prototype`` is 0...)."""
    if isinstance(target, bool):
        return False
    if _is_number(target):
        return 0.0
    if isinstance(target, str):
        return ""
    if isinstance(target, list | tuple):
        return []
    return UNDEFINED


def global_name(name: str) -> Any:
    """A name the variables object inherits from ``Object.prototype``, or :data:`UNDEFINED`."""
    if name == "__proto__":
        return OBJECT_PROTOTYPE_VALUE
    return OBJECT_PROTOTYPE.get(name, UNDEFINED)
