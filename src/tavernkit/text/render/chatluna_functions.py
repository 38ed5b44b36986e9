"""The built-in functions of ChatLuna's template dialect, as koishi-plugin-chatluna 1.3.36
registers them.

Every argument arrives as a string (the evaluator applied ``String()``). The clock, time zone
and random source are the render environment's (:class:`~tavernkit.text.macros.env.MacroEnv`),
so a test can fix them; every draw is one ``Math.random()`` of ChatLuna's, in its order.

- ``time_UTC(offset?)``: now plus ``parseInt(offset)`` hours as ``YYYY-MM-DD HH:MM:SS`` (years
  past 9999 as JavaScript's ``+YYYYYY``); a non-numeric offset gives ``Invalid UTC offset``.
- ``timeDiff(a, b)``: ``N day(s), N hour(s), N minute(s)`` (zero parts left out, seconds
  ignored) between two dates read as JavaScript's ``new Date(text)`` reads them (ISO dates in
  UTC, ISO date-times without a zone and the other shapes in local time: ``2024/01/02 12:30``,
  ``Jan 1, 2024``, ``3/10/2025, 2:30:45 AM``); under a minute, or a date that does not parse,
  is ``now``.
- ``date()`` / ``isodate()``: the local date ``YYYY-MM-DD``; ``isotime()``: ``HH:MM:SS``;
  ``weekday()``: the English day name.
- ``random(a, b)``: with exactly two numeric arguments an integer in ``[a, b]``; otherwise one
  item of the arguments joined by ``,``, split again and trimmed (``random()`` is ``''``).
- ``pick(...)``: one item of that list, drawn the same way (1.3.36 draws; it keeps nothing
  between calls).
- ``roll(expr)``: ``[count]d<sides>[+add]`` as a uniform integer in ``[count, count*sides] +
  add`` (ChatLuna's formula; ``d6`` is ``NaN``, ``2d6-1`` is ``2``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any

from tavernkit.jscompat import js_number_to_string, js_to_number, js_trim
from tavernkit.text.macros.env import MacroEnv

__all__ = ["BuiltinFunction", "builtin_functions", "js_date_parse", "js_parse_int"]

BuiltinFunction = Callable[[list[str], MacroEnv, Mapping[str, Any]], str]
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MS_PER_DAY = 86_400_000
_MAX_TIME_MS = 8.64e15
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def js_parse_int(text: str) -> float:
    """``parseInt(text)``: white space, a sign, ``0x`` hex or decimal digits; NaN without."""
    stripped = js_trim(text)
    sign = 1
    if stripped[:1] in ("+", "-"):
        sign = -1 if stripped[0] == "-" else 1
        stripped = stripped[1:]
    base, digits_allowed = 10, "0123456789"
    if stripped[:2].lower() == "0x":
        base, digits_allowed, stripped = 16, "0123456789abcdefABCDEF", stripped[2:]
    digits = ""
    for char in stripped:
        if char not in digits_allowed:
            break
        digits += char
    return float(sign * int(digits, base)) if digits else math.nan


# -- time -------------------------------------------------------------------------------------


def _now_ms(env: MacroEnv) -> float:
    now = env.clock()
    now = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    return (now - _EPOCH) / timedelta(milliseconds=1)


def _civil(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day count since 1970-01-01, proleptic Gregorian, any year."""
    z = days + 719_468
    era = (z if z >= 0 else z - 146_096) // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    day_of_year = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (1 if month <= 2 else 0), month, day


def _iso(ms: float) -> str:
    """``new Date(ms).toISOString()`` without its ``.mmmZ`` tail, ``T`` as a space."""
    if ms != ms or abs(ms) > _MAX_TIME_MS:
        raise ValueError("Invalid time value")
    whole = math.floor(ms)
    days, rest = divmod(whole, _MS_PER_DAY)
    year, month, day = _civil(days)
    seconds = rest // 1000
    if 0 <= year <= 9999:
        year_text = f"{year:04d}"
    else:
        year_text = ("+" if year > 0 else "-") + f"{abs(year):06d}"
    clock = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return f"{year_text}-{month:02d}-{day:02d} {clock}"


def _local(env: MacroEnv) -> datetime:
    now = env.clock()
    now = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    return now.astimezone(env.tz)


def time_utc(args: list[str], env: MacroEnv, configurable: Mapping[str, Any]) -> str:
    offset = js_parse_int(args[0]) if args and args[0] else 0.0
    if offset != offset:
        return "Invalid UTC offset"
    return _iso(_now_ms(env) + offset * 3_600_000)


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_ISO = re.compile(
    r"([+-]\d{6}|\d{4})(?:-(\d{2})(?:-(\d{2}))?)?"
    r"(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:\d{2})?)?"
)
_LEGACY_TOKEN = re.compile(r"\d+(?::\d+)*(?:\.\d+)?|[A-Za-z]+|[+-]\d{2}:?\d{2}")


def _days(year: int, month: int) -> int:
    """Days from 1970-01-01 to the first of ``month`` (proleptic Gregorian, any year)."""
    y = year - (1 if month <= 2 else 0)
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5
    return era * 146_097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719_468


def _epoch_ms(
    year: int, month: int, day: int, clock: tuple[int, int, int, int], zone: tzinfo
) -> float | None:
    """The instant, or None where V8 gives an invalid date. Like V8, any day 1..31 is taken
    in any month (``2023-02-31`` is 3 March)."""
    hour, minute, second, millis = clock
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour <= 24 and minute < 60 and second < 60):
        return None
    moment = ((_days(year, month) + day - 1) * 24 + hour) * 3_600_000
    moment += (minute * 60 + second) * 1000 + millis
    if zone is UTC:
        return float(moment)
    try:  # the zone's offset at that wall-clock time (a year datetime can hold)
        wall = datetime(year, month, 1) + timedelta(
            milliseconds=moment - _days(year, month) * _MS_PER_DAY
        )
    except (OverflowError, ValueError):
        return float(moment)
    offset = wall.replace(tzinfo=zone).utcoffset() or timedelta()
    return moment - offset / timedelta(milliseconds=1)


def _zone(text: str | None, local: tzinfo) -> tzinfo:
    if text is None:
        return local
    if text == "Z":
        return UTC
    sign = -1 if text[0] == "-" else 1
    hours, minutes = int(text[1:3]), int(text[-2:])
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def _parse_iso(text: str, local: tzinfo) -> float | None:
    match = _ISO.fullmatch(text)
    if match is None:
        return None
    year_text, month, day, hour, minute, second, fraction, zone_text = match.groups()
    millis = int((fraction or "0")[:3].ljust(3, "0"))
    clock = (int(hour or 0), int(minute or 0), int(second or 0), millis)
    # a date alone is UTC; a date-time without a zone is local time
    zone = UTC if hour is None else _zone(zone_text, local)
    return _epoch_ms(int(year_text), int(month or 1), int(day or 1), clock, zone)


def _parse_legacy(text: str, local: tzinfo) -> float | None:
    """The shapes V8's fallback parser reads: ``2024/01/02 12:30``, ``Jan 1, 2024``,
    ``3/10/2025, 2:30:45 AM``, ``2025-01-01 00:00:00``, with an optional ``GMT+0800``."""
    numbers: list[str] = []
    clock: tuple[int, int, int, int] | None = None
    month_name: int | None = None
    meridiem: str | None = None
    zone: tzinfo | None = None
    for token in _LEGACY_TOKEN.findall(re.sub(r"[/,\-](?=\d)", " ", text.replace(",", " "))):
        word = token.lower()
        if ":" in token and token[0] not in "+-":
            parts = token.split(":")
            seconds, _, fraction = (parts[2] if len(parts) > 2 else "0").partition(".")
            clock = (
                int(parts[0]),
                int(parts[1]),
                int(seconds),
                int((fraction or "0")[:3].ljust(3, "0")),
            )
        elif token.isdigit():
            numbers.append(token)
        elif word in ("am", "pm"):
            meridiem = word
        elif word in ("utc", "gmt", "z"):
            zone = UTC
        elif token[0] in "+-":
            zone = _zone(token[:3] + ":" + token[-2:], local)
        elif word[:3] in _MONTHS and len(word) >= 3:
            month_name = _MONTHS.index(word[:3]) + 1
        elif word in ("mon", "tue", "wed", "thu", "fri", "sat", "sun") or word.endswith("day"):
            continue
        else:
            return None
    if clock is not None and meridiem is not None:
        hour = clock[0] % 12 + (12 if meridiem == "pm" else 0)
        clock = (hour, *clock[1:])
    if month_name is not None:
        if len(numbers) != 2:
            return None
        day_text, year_text = numbers if len(numbers[0]) <= 2 else numbers[::-1]
        year, month, day = int(year_text), month_name, int(day_text)
    elif len(numbers) == 3:
        if len(numbers[0]) >= 3:
            year, month, day = (int(n) for n in numbers)
        else:
            month, day, year = (int(n) for n in numbers)
    else:
        return None
    if year < 50 and len(str(year)) <= 2:
        year += 2000
    elif year < 100 and len(str(year)) <= 2:
        year += 1900
    return _epoch_ms(year, month, day, clock or (0, 0, 0, 0), zone or local)


def js_date_parse(text: str, local: tzinfo) -> float | None:
    """``new Date(text).getTime()`` for the shapes ChatLuna meets; None where JS gives NaN."""
    text = js_trim(text)
    if not text:
        return None
    iso = _parse_iso(text, local)
    if iso is not None or _ISO.fullmatch(text):
        return iso
    return _parse_legacy(text, local)


def time_diff(args: list[str], env: MacroEnv, configurable: Mapping[str, Any]) -> str:
    first = js_date_parse(args[0], env.tz) if args else None
    second = js_date_parse(args[1], env.tz) if len(args) > 1 else None
    if first is None or second is None:
        return "now"
    diff = abs(first - second)
    parts = []
    for count, unit in (
        (math.floor(diff / _MS_PER_DAY), "day"),
        (math.floor(diff % _MS_PER_DAY / 3_600_000), "hour"),
        (math.floor(diff % 3_600_000 / 60_000), "minute"),
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


# -- chance -----------------------------------------------------------------------------------


def _select(args: list[str], env: MacroEnv) -> str:
    """ChatLuna's ``selectFromList``: the arguments joined by ``,``, split, trimmed, one drawn
    (``''`` is an item, so ``random()`` draws and gives ``''``)."""
    items = [js_trim(item) for item in ",".join(args).split(",")]
    return items[math.floor(env.random_source().random() * len(items))]


def random_value(args: list[str], env: MacroEnv, configurable: Mapping[str, Any]) -> str:
    if len(args) == 2:
        low, high = js_to_number(args[0]), js_to_number(args[1])
        if low == low and high == high:
            drawn = env.random_source().random()
            return js_number_to_string(math.floor(drawn * (high - low + 1) + low))
    return _select(args, env)


def pick(args: list[str], env: MacroEnv, configurable: Mapping[str, Any]) -> str:
    return _select(args, env)


def roll(args: list[str], env: MacroEnv, configurable: Mapping[str, Any]) -> str:
    if not args:
        raise TypeError("Cannot read properties of undefined (reading 'split')")
    parts = args[0].split("d")
    count = 1.0
    if len(parts) > 1 and js_to_number(parts[0]) == js_to_number(parts[0]):
        count = js_parse_int(parts[0])
    last = parts[-1].split("+")
    add = 0.0
    if len(last) > 1 and js_to_number(last[1]) == js_to_number(last[1]):
        add = js_parse_int(last[1])
    sides = js_parse_int(last[0]) if js_to_number(last[0]) == js_to_number(last[0]) else 1.0
    drawn = env.random_source().random()  # drawn even when the formula is NaN, as in JS
    span = count * sides - count + 1
    result = math.floor(drawn * span) + count + add if span == span else math.nan
    return js_number_to_string(result)


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
