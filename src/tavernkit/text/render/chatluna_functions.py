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
    era = z // 146_097  # floor division: the algorithm's truncation fix-up is built in
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
_LEGACY_TOKEN = re.compile(
    r"(?P<paren>\([^)]*\)?)"
    r"|(?P<clock>\d+:\d+(?::\d+(?:\.\d+)?)?)"
    r"|(?P<number>\d+)"
    r"|(?P<sign>[+-])"
    r"|(?P<word>[^\W\d_]+)"
    r"|(?P<other>.)",
    re.DOTALL,
)
_ZONE_NAMES = {"ut": 0, "utc": 0, "gmt": 0, "z": 0, "est": -5, "edt": -4, "cst": -6, "cdt": -5}
_ZONE_NAMES |= {"mst": -7, "mdt": -6, "pst": -8, "pdt": -7}


def _days(year: int, month: int) -> int:
    """Days from 1970-01-01 to the first of ``month`` (proleptic Gregorian, any year)."""
    y = year - (1 if month <= 2 else 0)
    era = y // 400
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
    if zone is not UTC:
        # the zone's offset at that wall-clock time; a year Python's datetime cannot hold
        # takes the offset of the same day in 9999
        wall_year = min(max(year, 1), 9999)
        into_month = timedelta(milliseconds=moment - _days(year, month) * _MS_PER_DAY)
        try:
            wall = datetime(wall_year, month, 1) + into_month
        except OverflowError:
            wall = datetime(wall_year, month, 1)
        offset = wall.replace(tzinfo=zone).utcoffset() or timedelta()
        moment -= int(offset / timedelta(milliseconds=1))
    return float(moment) if abs(moment) <= _MAX_TIME_MS else None


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


class _Legacy:
    """The pieces V8's fallback date parser collects (``DateParser`` of V8: a day composer of
    up to three numbers or a named month, a time, a zone)."""

    def __init__(self) -> None:
        self.numbers: list[int] = []
        self.month: int | None = None
        self.clock: tuple[int, int, int, int] | None = None
        self.meridiem: str | None = None
        self.zone: tzinfo | None = None

    def day(self) -> tuple[int, int, int] | None:
        if not self.numbers or len(self.numbers) > 3:
            return None
        comp = self.numbers + [1] * (3 - len(self.numbers))

        def is_day(value: int) -> bool:
            return 1 <= value <= 31

        if self.month is None:
            if not is_day(comp[0]):
                year, month, day = comp
            else:
                month, day, year = comp
        else:
            month = self.month
            year, day = (comp[0], comp[1]) if not is_day(comp[0]) else (comp[1], comp[0])
        if 0 <= year <= 49:
            year += 2000
        elif 50 <= year <= 99:
            year += 1900
        if not (1 <= month <= 12 and is_day(day)):
            return None
        return year, month, day

    def time(self) -> tuple[int, int, int, int] | None:
        hour, minute, second, millis = self.clock or (0, 0, 0, 0)
        if self.meridiem is not None:
            if hour > 12:
                return None
            hour = hour % 12 + (12 if self.meridiem == "pm" else 0)
        if hour == 24 and (minute, second, millis) != (0, 0, 0):
            return None
        if hour > 24 or minute > 59 or second > 59:
            return None
        return hour, minute, second, millis


def _clock(text: str) -> tuple[int, int, int, int]:
    parts = text.split(":")
    seconds, _, fraction = (parts[2] if len(parts) > 2 else "0").partition(".")
    return int(parts[0]), int(parts[1]), int(seconds), int((fraction or "0")[:3].ljust(3, "0"))


def _offset(text: str, pos: int, sign: str) -> tuple[tzinfo, int] | None:
    """A ``+8``, ``+0800`` or ``+08:00`` zone offset at ``pos``."""
    match = re.compile(r"(\d+)(?::(\d{2}))?").match(text, pos)
    if match is None:
        return None
    digits, minutes = match.group(1), match.group(2)
    if minutes is not None:
        hours, mins = int(digits), int(minutes)
    elif len(digits) <= 2:
        hours, mins = int(digits), 0
    else:
        hours, mins = divmod(int(digits), 100)
    delta = timedelta(hours=hours, minutes=mins)
    return timezone(-delta if sign == "-" else delta), match.end()


def _starts_offset(previous: str, found: _Legacy) -> bool:
    """Whether a sign starts a zone offset: right after the time or a zone name."""
    return previous == "clock" or (previous == "word" and found.zone is not None)


def _parse_legacy(text: str, local: tzinfo) -> float | None:
    """The shapes V8's fallback parser reads: ``2024/01/02 12:30``, ``Jan 1, 2024``,
    ``3/10/2025, 2:30:45 AM``, ``Tue Mar 05 2024 10:00:00 GMT+0800 (China Standard Time)``."""
    found = _Legacy()
    pos = 0
    previous = ""  # the kind of the last token that was not white space
    while pos < len(text):
        match = _LEGACY_TOKEN.match(text, pos)
        assert match is not None  # the last alternative takes any character
        pos = match.end()
        kind, token = match.lastgroup, match.group()
        anchor = previous
        if not token.isspace():
            previous = kind or ""
        if kind == "clock":
            found.clock = _clock(token)
        elif kind == "number":
            found.numbers.append(int(token))
        elif kind == "sign" and _starts_offset(anchor, found):
            parsed = _offset(text, pos, token)
            if parsed is None:
                return None
            found.zone, pos = parsed
        elif kind == "word":
            word = token.lower()
            read_number = bool(found.numbers) or found.clock is not None
            if word in ("am", "pm") and found.clock is not None:
                found.meridiem = word
            elif len(word) >= 3 and word[:3] in _MONTHS:
                found.month = _MONTHS.index(word[:3]) + 1
            elif word in _ZONE_NAMES and read_number:
                found.zone = timezone(timedelta(hours=_ZONE_NAMES[word]))
            elif word == "t" and read_number:
                continue  # the ISO date/time separator
            elif read_number:
                return None  # V8: a word it does not know, after a number
    day, clock = found.day(), found.time()
    if day is None or clock is None:
        return None
    return _epoch_ms(*day, clock, found.zone or local)


def js_date_parse(text: str, local: tzinfo) -> float | None:
    """``new Date(text).getTime()`` for the shapes ChatLuna meets; None where JS gives NaN."""
    if _ISO.fullmatch(text):
        return _parse_iso(text, local)
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
