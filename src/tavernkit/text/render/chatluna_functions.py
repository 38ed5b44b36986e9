"""The built-in functions of ChatLuna's template dialect, with ChatLuna's semantics.

Every argument arrives as a string (the evaluator applied ``String()``). The clock, time zone
and random source are the render environment's (``RenderOptions.env``), so a test can fix
them. Behaviour follows ChatLuna's ``string.ts`` as the reference notes record it, quirks
included:

- ``time_UTC(offset?)``: now plus ``parseInt(offset)`` hours, ``YYYY-MM-DD HH:MM:SS``;
  a non-numeric offset gives ``Invalid UTC offset``.
- ``timeDiff(a, b)``: ``N day(s), N hour(s), N minute(s)`` (zero parts left out, seconds
  ignored); under a minute, or a date that does not parse, is ``now``.
- ``date()`` / ``isodate()``: the local date ``YYYY-MM-DD``; ``isotime()``: ``HH:MM:SS``;
  ``weekday()``: the English day name.
- ``random(a, b)``: with exactly two numeric arguments an integer in ``[a, b]``; otherwise
  one item of the arguments joined by ``,`` and split again (``random()`` is ``''``).
- ``pick(...)``: the same list, but the item is chosen by ``sha1(conversationId + ':' +
  joined)`` (``configurable["conversationId"]``), so a conversation always gets the same one.
- ``roll(expr)``: ``[count]d<sides>[+add]`` as a uniform integer in ``[count,
  count*sides] + add`` (ChatLuna's formula; ``d6`` is ``NaN``, ``2d6-1`` is ``2``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from tavernkit.jscompat import js_number_to_string, js_to_number
from tavernkit.text.macros.env import MacroEnv

__all__ = ["BuiltinFunction", "builtin_functions", "js_parse_int"]

BuiltinFunction = Callable[[list[str], MacroEnv, Mapping[str, Any]], str]
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def js_parse_int(text: str) -> float:
    """``parseInt(text, 10)``: leading whitespace, a sign and digits; NaN without digits."""
    stripped = text.strip()
    sign = 1
    if stripped[:1] in "+-" and stripped:
        sign = -1 if stripped[0] == "-" else 1
        stripped = stripped[1:]
    digits = ""
    for char in stripped:
        if not "0" <= char <= "9":
            break
        digits += char
    return sign * float(digits) if digits else math.nan


def _now(env: MacroEnv) -> datetime:
    now = env.clock()
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


def _local(env: MacroEnv) -> datetime:
    return _now(env).astimezone(env.tz)


def time_utc(args: list[str], env: MacroEnv, configurable: Mapping[str, Any]) -> str:
    offset = js_parse_int(args[0]) if args and args[0] else 0.0
    if offset != offset:
        return "Invalid UTC offset"
    moment = _now(env).astimezone(UTC) + timedelta(hours=offset)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _parse_date(text: str) -> datetime | None:
    text = text.strip()
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def time_diff(args: list[str], env: MacroEnv, configurable: Mapping[str, Any]) -> str:
    first = _parse_date(args[0]) if args else None
    second = _parse_date(args[1]) if len(args) > 1 else None
    if first is None or second is None:
        return "now"
    diff = abs(int((second - first).total_seconds() * 1000))
    parts = []
    for count, unit in (
        (diff // 86_400_000, "day"),
        (diff % 86_400_000 // 3_600_000, "hour"),
        (diff % 3_600_000 // 60_000, "minute"),
    ):
        if count > 0:
            parts.append(f"{count} {unit}{'s' if count > 1 else ''}")
    return ", ".join(parts) or "now"


def iso_date(args: list[str], env: MacroEnv, configurable: Mapping[str, Any]) -> str:
    return _local(env).strftime("%Y-%m-%d")


def iso_time(args: list[str], env: MacroEnv, configurable: Mapping[str, Any]) -> str:
    return _local(env).strftime("%H:%M:%S")


def weekday(args: list[str], env: MacroEnv, configurable: Mapping[str, Any]) -> str:
    return _WEEKDAYS[_local(env).weekday()]


def _items(args: list[str]) -> list[str]:
    joined = ",".join(args)
    return [item.strip() for item in joined.split(",")] if joined else []


def random_value(args: list[str], env: MacroEnv, configurable: Mapping[str, Any]) -> str:
    rng = env.random_source()
    if len(args) == 2:
        low, high = js_to_number(args[0]), js_to_number(args[1])
        if low == low and high == high:
            return js_number_to_string(math.floor(rng.random() * (high - low + 1) + low))
    items = _items(args)
    return items[math.floor(rng.random() * len(items))] if items else ""


def pick(args: list[str], env: MacroEnv, configurable: Mapping[str, Any]) -> str:
    items = _items(args)
    if not items:
        return ""
    seed = configurable.get("conversationId") or ""
    digest = hashlib.sha1(f"{seed}:{','.join(args)}".encode()).digest()
    return items[int.from_bytes(digest[:4], "big") % len(items)]


def roll(args: list[str], env: MacroEnv, configurable: Mapping[str, Any]) -> str:
    if not args:
        raise ValueError("roll needs an expression")
    parts = args[0].split("d")
    count = 1.0
    if len(parts) > 1 and js_to_number(parts[0]) == js_to_number(parts[0]):
        count = js_parse_int(parts[0])
    last = parts[-1].split("+")
    sides = js_parse_int(last[0]) if js_to_number(last[0]) == js_to_number(last[0]) else 1.0
    add = 0.0
    if len(last) > 1 and js_to_number(last[1]) == js_to_number(last[1]):
        add = js_parse_int(last[1])
    span = count * sides - count + 1
    if span != span or count != count or add != add:
        return "NaN"
    return js_number_to_string(math.floor(env.random_source().random() * span) + count + add)


def builtin_functions() -> dict[str, BuiltinFunction]:
    """A fresh table of the built-ins, by name (``url`` is the renderer's own provider)."""
    return {
        "time_UTC": time_utc,
        "timeDiff": time_diff,
        "date": iso_date,
        "isodate": iso_date,
        "isotime": iso_time,
        "weekday": weekday,
        "random": random_value,
        "pick": pick,
        "roll": roll,
    }
