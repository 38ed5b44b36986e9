"""What a member access reaches in ChatLuna's JavaScript: ``Object.prototype`` and the built-in
methods of strings, arrays, numbers and booleans that a template can call with no arguments
(``{name.toUpperCase}``, ``{nums.reverse}``), and the names the variables object inherits.

The values and coercions these methods work on are :mod:`.chatluna_js`'s; this module is the
property table over them, kept apart because it is most of the JavaScript surface by size.
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
    js_trim,
    js_trim_end,
    js_trim_start,
    utf16_len,
)
from tavernkit.text.render.chatluna_js import (
    UNDEFINED,
    JsFunction,
    char_at,
    is_function,
    is_number,
    to_string,
    utf16_key,
)

__all__ = ["OBJECT_PROTOTYPE", "get_property", "global_name"]


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
    if is_number(this):
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
        "charAt": lambda s: char_at(s, 0),
        "at": lambda s: char_at(s, 0) if s else UNDEFINED,
        "charCodeAt": lambda s: float(ord(char_at(s, 0))) if s else math.nan,
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
    defined.sort(key=lambda v: utf16_key(to_string(v)))
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
        if not is_number(this):
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
            return char_at(target, index) if index < utf16_len(target) else UNDEFINED
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
    if is_number(target):
        return _NUMBER_METHODS.get(name) or OBJECT_PROTOTYPE.get(name, UNDEFINED)
    return OBJECT_PROTOTYPE.get(name, UNDEFINED) if not is_function(target) else UNDEFINED


def _prototype_value(target: Any) -> Any:
    """What a primitive's prototype object prints like (``Number.prototype`` is 0...)."""
    if isinstance(target, bool):
        return False
    if is_number(target):
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
