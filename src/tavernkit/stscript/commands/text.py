"""Math and text: ``/add`` … ``/rand``, ``/len``, ``/upper``, ``/substr``, ``/replace``,
``/test``, ``/match``, ``/trimstart``, ``/trimend``, ``/sort``, ``/array-wrap``, ``/fuzzy``,
``/tokens`` — SillyTavern's rules, JavaScript number printing included (``0.1 + 0.2`` is
``0.30000000000000004``, ``Math.round(-2.5)`` is ``-2``)."""

from __future__ import annotations

import functools
import json
import math
import operator
import unicodedata
from collections.abc import Callable
from typing import Any

from tavernkit.errors import ScriptError
from tavernkit.jscompat import (
    is_false_boolean,
    js_json_stringify,
    js_number_to_string,
    js_ordered_items,
    js_round,
    js_string,
    js_to_number,
    js_trim_end,
    normalize_number,
    utf16_len,
)
from tavernkit.stscript.commands.flow import resolve_operand
from tavernkit.stscript.executor import CommandCall
from tavernkit.stscript.jsregex import (
    js_replace,
    literal_replace_all,
    regex_from_string,
)
from tavernkit.stscript.registry import CommandRegistry, NamedArgSpec
from tavernkit.stscript.scope import (
    ScriptClosure,
    js_parse_float,
    pipe_text,
)
from tavernkit.text.tokens import ByteEstimateTokenizer

__all__ = ["fuzzy_score", "register", "trim_to_end_sentence", "trim_to_start_sentence"]

Numbers = list[float]


# -- math -------------------------------------------------------------------------------------


def _series(call: CommandCall, value: Any) -> Numbers:
    """``parseNumericSeries``: numbers, variable names or one JSON list; the rest dropped."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [float(value)]
    values: list[Any] = list(value) if isinstance(value, list) else pipe_text(value).split(" ")
    if len(values) == 1 and isinstance(values[0], str) and values[0].startswith("["):
        try:
            parsed = json.loads(values[0])
        except (ValueError, RecursionError) as exc:
            raise ScriptError(f"{values[0]} is not valid JSON") from exc
        values = parsed if isinstance(parsed, list) else [parsed]
    out: Numbers = []
    for item in values:
        if isinstance(item, str):
            item = item.strip()
            if item == "":
                continue
        number = js_to_number(item)
        if math.isnan(number):
            resolved = resolve_operand(call, pipe_text(item))
            number = math.nan if isinstance(resolved, ScriptClosure) else js_to_number(resolved)
        if not math.isnan(number):
            out.append(number)
    return out


def _operation(function: Callable[[Numbers], float], single: bool = False) -> Any:
    def callback(call: CommandCall) -> str:
        value = call.value
        if value is None or value == "":
            return "0"
        numbers = _series(call, value)
        if not numbers:
            return "0"
        try:
            result = function(numbers[:1] if single else numbers)
        except (OverflowError, ZeroDivisionError, ValueError):
            result = math.nan
        if math.isnan(result):
            return "0"
        return js_number_to_string(normalize_number(result))

    return callback


def _sub(numbers: Numbers) -> float:
    return functools.reduce(lambda a, b: a - b, numbers)


def _product(numbers: Numbers) -> float:
    return functools.reduce(lambda a, b: a * b, numbers)


def _div(numbers: Numbers) -> float:
    if len(numbers) < 2:
        return math.nan
    if numbers[1] == 0:
        return 0.0
    return numbers[0] / numbers[1]


def _mod(numbers: Numbers) -> float:
    if len(numbers) < 2 or numbers[1] == 0:
        return math.nan
    return math.fmod(numbers[0], numbers[1])


def _pow(numbers: Numbers) -> float:
    if len(numbers) < 2:
        return math.nan
    base, exponent = numbers[0], numbers[1]
    try:
        return math.pow(base, exponent)
    except OverflowError:
        if base < 0 and float(exponent).is_integer() and int(exponent) % 2:
            return -math.inf
        return math.inf
    except ValueError:
        return math.nan


def _unary(function: Callable[[float], float]) -> Callable[[Numbers], float]:
    def apply(numbers: Numbers) -> float:
        try:
            return function(numbers[0])
        except (ValueError, OverflowError):
            return math.nan

    return apply


def _log(value: float) -> float:
    if value == 0:
        return -math.inf
    if value < 0:
        return math.nan
    return math.log(value)


def _sqrt(value: float) -> float:
    return math.nan if value < 0 else math.sqrt(value)


def _trig(function: Callable[[float], float]) -> Callable[[float], float]:
    return lambda value: math.nan if math.isinf(value) else function(value)


def _rand(call: CommandCall) -> Any:
    start = js_to_number(call.text("from") or "")
    start = 0.0 if call.arg("from") is None or math.isnan(start) else start
    # to= or, without it, the unnamed value (the pipe of an earlier command)
    upper = call.text("to")
    if upper is None:
        upper = call.value_text() or None
    end = js_to_number(upper) if upper is not None else math.nan
    end = 1.0 if math.isnan(end) else end
    value = start + call.runner.random() * (end - start)
    match call.text("round"):
        case "round":
            return js_number_to_string(normalize_number(js_round(value)))
        case "ceil":
            return js_number_to_string(normalize_number(float(math.ceil(value))))
        case "floor":
            return js_number_to_string(normalize_number(float(math.floor(value))))
    return js_number_to_string(normalize_number(value))


def _len(call: CommandCall) -> Any:
    value = call.value
    text = "" if value is None else pipe_text(value)
    try:
        parsed: Any = json.loads(text)
    except (ValueError, RecursionError):
        parsed = text
    if isinstance(parsed, list):
        return len(parsed)
    if isinstance(parsed, str):
        return utf16_len(parsed)
    if isinstance(parsed, dict):
        return len(parsed)
    if isinstance(parsed, bool):
        return 0
    if isinstance(parsed, int | float):
        return len(js_number_to_string(parsed))
    if parsed is None:
        raise ScriptError("Cannot convert undefined or null to object")
    return 0


# -- text -------------------------------------------------------------------------------------


def _text(call: CommandCall) -> str:
    value = call.value
    return "" if value is None else pipe_text(value)


def trim_to_start_sentence(text: str) -> str:
    """``trimToStartSentence``: drop the text up to the end of the first sentence."""
    if not text:
        return ""
    first = text.find(".")
    skip_one = False
    for mark in ("!", "?"):
        position = text.find(mark)
        if 0 < position < first:
            first = position
    newline = text.find("\n")
    if 0 < newline < first:
        first = newline
        skip_one = True
    if first > 0:
        return text[first + 1 :] if skip_one else text[first + 2 :]
    return text


_PUNCTUATION = frozenset(
    [
        ".",
        "!",
        "?",
        "*",
        '"',
        ")",
        "}",
        "`",
        "]",
        "$",
        "。",
        "！",
        "？",
        "”",
        "）",
        "】",
        "’",
        "」",
        "_",
    ]
)


def _is_emoji(char: str) -> bool:
    code = ord(char[0])
    if 0x1F000 <= code <= 0x1FAFF or 0x2600 <= code <= 0x27BF or 0x2B00 <= code <= 0x2BFF:
        return unicodedata.category(char[0]) in ("So", "Sk", "Cn") or code >= 0x1F000
    return code in (0x00A9, 0x00AE, 0x203C, 0x2049, 0x2122, 0x2139, 0x3030, 0x303D)


def trim_to_end_sentence(text: str) -> str:
    """``trimToEndSentence``: cut after the last sentence-ending mark (or emoji)."""
    if not text:
        return ""
    last = -1
    characters = list(text)
    for i in range(len(characters) - 1, -1, -1):
        char = characters[i]
        emoji = _is_emoji(char)
        if char in _PUNCTUATION or emoji:
            last = i - 1 if not emoji and i > 0 and characters[i - 1].isspace() else i
            break
    if last == -1:
        return js_trim_end(text)
    return js_trim_end("".join(characters[: last + 1]))


def _slice_index(value: Any, length: int, default: int) -> int:
    if value is None:
        return default
    number = js_to_number(pipe_text(value))
    if math.isnan(number):
        return 0
    if math.isinf(number):
        return length if number > 0 else 0
    index = int(number)
    if index < 0:
        return max(length + index, 0)
    return min(index, length)


def _substr(call: CommandCall) -> Any:
    text = _text(call)
    start = _slice_index(call.arg("start"), len(text), 0)
    end = _slice_index(call.arg("end"), len(text), len(text))
    return text[start:end] if start < end else ""


def _regex_arg(call: CommandCall) -> Any:
    pattern = call.text("pattern")
    regex = regex_from_string(pattern) if pattern else None
    if regex is None:
        raise ScriptError("The value of 'pattern' argument is not a valid regular expression.")
    return regex


def _replace(call: CommandCall) -> Any:
    mode = call.text("mode") or "literal"
    pattern = call.text("pattern") or ""
    replacer = call.text("replacer") or ""
    if not pattern:
        raise ScriptError("Argument of 'pattern=' cannot be empty")
    text = _text(call)
    if mode == "literal":
        return literal_replace_all(text, pattern, replacer)
    if mode == "regex":
        regex = regex_from_string(pattern)
        if regex is None:  # JavaScript replaces the text "undefined", once
            return text.replace("undefined", replacer, 1)
        return js_replace(text, regex, replacer)
    raise ScriptError("Invalid '/replace mode=' argument specified!")


def _test(call: CommandCall) -> Any:
    regex = _regex_arg(call)
    return "true" if regex.find(_text(call)) is not None else "false"


def _match(call: CommandCall) -> Any:
    regex = _regex_arg(call)
    text = _text(call)
    if regex.is_global:
        return js_json_stringify([list(m.groups) for m in regex.find_all(text)])
    found = regex.find(text)
    return js_json_stringify(list(found.groups)) if found is not None else ""


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object"


def _compare(a: Any, b: Any) -> int:
    ta, tb = _type_name(a), _type_name(b)
    if ta == tb:
        if ta == "object":
            a, b = js_string(a), js_string(b)
        return -1 if a < b else (1 if a > b else 0)
    return -1 if ta < tb else 1


def _sort(call: CommandCall) -> Any:
    raw = call.value
    text = "" if raw is None else pipe_text(raw)
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return text
    key = functools.cmp_to_key(_compare)
    if isinstance(parsed, list):
        return js_json_stringify(sorted(parsed, key=key))
    if isinstance(parsed, dict):
        items = js_ordered_items(parsed)
        if is_false_boolean(call.text("keysort") or ""):
            ordered = sorted(items, key=lambda kv: key(kv[1]))
            return js_json_stringify([k for k, _ in ordered])
        return js_json_stringify(sorted((k for k, _ in items), key=key))
    return text


def _array_wrap(call: CommandCall) -> Any:
    text = _text(call)
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, list):
        return text
    return js_json_stringify([text])


def _array_unwrap(call: CommandCall) -> Any:
    text = _text(call)
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if isinstance(parsed, list):
        if not parsed:
            return ""
        first = parsed[0]
        return first if isinstance(first, str) else js_json_stringify(first)
    return text


def fuzzy_score(pattern: str, text: str) -> float:
    """Fuse.js's score of ``pattern`` inside ``text`` (location ignored): the fewest edits
    that make the pattern a substring of the text, over the pattern's length."""
    pattern, text = pattern.lower(), text.lower()
    if not pattern:
        return 1.0
    if pattern in text:
        return 0.0
    previous = [0] * (len(text) + 1)
    for i, p_char in enumerate(pattern, start=1):
        current = [i] + [0] * len(text)
        for j, t_char in enumerate(text, start=1):
            cost = 0 if p_char == t_char else 1
            current[j] = min(previous[j - 1] + cost, previous[j] + 1, current[j - 1] + 1)
        previous = current
    return min(previous) / len(pattern)


def _fuzzy(call: CommandCall) -> Any:
    text = _text(call)
    if not text or call.arg("list") is None:
        return ""
    source = resolve_operand(call, call.arg("list"))
    try:
        items = json.loads(pipe_text(source))
    except (ValueError, RecursionError):
        return ""
    if not isinstance(items, list):
        return ""
    threshold = js_parse_float(call.text("threshold"))
    limit = 0.4 if math.isnan(threshold) else threshold
    best: tuple[float, Any] | None = None
    for item in items:
        score = fuzzy_score(pipe_text(item), text)
        if score > limit:
            continue
        if (call.text("mode") or "first") == "first":
            return item
        if best is None or score < best[0]:
            best = (score, item)
    return best[1] if best is not None else ""


def _tokens(call: CommandCall) -> Any:
    counter = call.host.count_tokens
    text = _text(call)
    return counter(text) if counter is not None else ByteEstimateTokenizer().count(text)


def _upper(call: CommandCall) -> Any:
    return _text(call).upper()


def _lower(call: CommandCall) -> Any:
    return _text(call).lower()


def register(registry: CommandRegistry) -> None:
    _register_math(registry)
    _register_text(registry)
    _register_lists(registry)


def _register_math(registry: CommandRegistry) -> None:
    """The math commands (/add ... /log) and /rand."""
    reg = registry.register
    math_ops: list[tuple[str, Callable[[Numbers], float], bool, str]] = [
        ("add", lambda n: functools.reduce(operator.add, n, 0.0), False, "Sum of the values."),
        ("sub", _sub, False, "First value minus the rest."),
        ("mul", _product, False, "Product of the values."),
        ("max", max, False, "Largest value."),
        ("min", min, False, "Smallest value."),
        ("div", _div, False, "First value divided by the second (0 when dividing by 0)."),
        ("mod", _mod, False, "Remainder of the division (sign of the dividend)."),
        ("pow", _pow, False, "First value to the power of the second."),
        ("abs", _unary(abs), True, "Absolute value."),
        ("sqrt", _unary(_sqrt), True, "Square root."),
        ("round", _unary(js_round), True, "Rounded (halves toward +infinity)."),
        ("sin", _unary(_trig(math.sin)), True, "Sine."),
        ("cos", _unary(_trig(math.cos)), True, "Cosine."),
        ("log", _unary(_log), True, "Natural logarithm."),
    ]
    for name, function, single, text in math_ops:
        reg(
            name,
            _operation(function, single),
            unnamed_types=("number", "variable", "list"),
            split=True,
            help=text,
        )
    reg(
        "rand",
        _rand,
        named_args=(
            NamedArgSpec("from", types=("number",), default="0"),
            NamedArgSpec("to", types=("number",), default="1"),
            NamedArgSpec("round", enum=("round", "ceil", "floor")),
        ),
        unnamed_types=("number",),
        help="A random number from from= to to= (Math.random).",
    )


def _register_text(registry: CommandRegistry) -> None:
    """Text commands: length, case, substrings, regex replace and match, sentence trims."""
    reg = registry.register
    reg("len", _len, aliases=("length",), help="Items of a list, keys of an object, else length.")
    reg("upper", _upper, aliases=("uppercase", "to-upper"), help="Upper case.")
    reg("lower", _lower, aliases=("lowercase", "to-lower"), help="Lower case.")
    reg(
        "substr",
        _substr,
        aliases=("substring",),
        named_args=(
            NamedArgSpec("start", types=("number",)),
            NamedArgSpec("end", types=("number",)),
        ),
        help="A slice of the text (JavaScript's slice).",
    )
    reg(
        "replace",
        _replace,
        aliases=("re",),
        named_args=(
            NamedArgSpec("mode", enum=("literal", "regex"), default="literal"),
            "pattern",
            NamedArgSpec("replacer", default=""),
        ),
        help="Replaces a literal text (all) or a regex's matches.",
    )
    reg("test", _test, named_args=("pattern",), help="'true' if the regex matches the text.")
    reg("match", _match, named_args=("pattern",), help="The regex's match (JSON).")
    reg("trimstart", lambda call: trim_to_start_sentence(_text(call)), help="Cut to a sentence.")
    reg("trimend", lambda call: trim_to_end_sentence(_text(call)), help="Cut after a sentence.")


def _register_lists(registry: CommandRegistry) -> None:
    """Lists and the rest: /sort, array wrapping, /fuzzy, /tokens."""
    reg = registry.register
    reg(
        "sort",
        _sort,
        named_args=(NamedArgSpec("keysort", types=("bool",), default="true"),),
        help="Sorts a JSON list, or an object's keys.",
    )
    reg("array-wrap", _array_wrap, help="Wraps a value into a JSON list.")
    reg("array-unwrap", _array_unwrap, help="The first item of a JSON list.")
    reg(
        "fuzzy",
        _fuzzy,
        named_args=(
            NamedArgSpec("list", types=("list", "variable")),
            NamedArgSpec("threshold", types=("number",), default="0.4"),
            NamedArgSpec("mode", enum=("first", "best"), default="first"),
        ),
        help="The list item that fuzzy-matches the text.",
    )
    reg("tokens", _tokens, help="Token count of the text.")
