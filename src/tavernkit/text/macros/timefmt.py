"""moment.js-compatible date formatting (English locale) and ``humanize`` thresholds.

SillyTavern's time macros format with moment (``LT``, ``LL``, ``dddd``, user formats through
``{{datetimeformat}}``) and describe durations with ``moment.duration(...).humanize()``; these
are written from moment's documented token table and relative-time thresholds.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime, timedelta, timezone

__all__ = ["format_moment", "humanize", "parse_moment"]

_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
_LONG = {
    "LTS": "h:mm:ss A",
    "LT": "h:mm A",
    "L": "MM/DD/YYYY",
    "LL": "MMMM D, YYYY",
    "LLL": "MMMM D, YYYY h:mm A",
    "LLLL": "dddd, MMMM D, YYYY h:mm A",
    "l": "M/D/YYYY",
    "ll": "MMM D, YYYY",
    "lll": "MMM D, YYYY h:mm A",
    "llll": "ddd, MMM D, YYYY h:mm A",
}
_LONG_RE = re.compile(r"(\[[^\[]*\])|(\\)?(LTS|LT|LL?L?L?|l{1,4})")
_TOKEN_RE = re.compile(
    r"\[[^\[]*\]|\\.|Mo|MM?M?M?|Do|DDDo|DD?D?D?|ddd?d?|do?|w[o|w]?|W[o|W]?|Qo?|YYYYYY|YYYYY"
    r"|YYYY|YY|y{2,4}|yo?|gg(?:ggg?)?|GG(?:GGG?)?|e|E|a|A|hh?|HH?|kk?|mm?|ss?|S{1,9}|x|X|zz?|ZZ?|."
)


def _ordinal(n: int) -> str:
    b = n % 10
    suffix = "th" if n % 100 // 10 == 1 else {1: "st", 2: "nd", 3: "rd"}.get(b, "th")
    return f"{n}{suffix}"


def _js_day(moment: datetime) -> int:
    return (moment.weekday() + 1) % 7


def _first_week_offset(year: int, dow: int, doy: int) -> int:
    fwd = 7 + dow - doy
    first = date(year, 1, 1) + timedelta(days=fwd - 1)
    fwdlw = (7 + (first.weekday() + 1) % 7 - dow) % 7
    return -fwdlw + fwd - 1


def _weeks_in_year(year: int, dow: int, doy: int) -> int:
    days = 366 if (year % 4 == 0 and year % 100 != 0) or year % 400 == 0 else 365
    return (days - _first_week_offset(year, dow, doy) + _first_week_offset(year + 1, dow, doy)) // 7


def _week(moment: datetime, dow: int, doy: int) -> tuple[int, int]:
    year = moment.year
    offset = _first_week_offset(year, dow, doy)
    week = (moment.timetuple().tm_yday - offset - 1) // 7 + 1
    if week < 1:
        return week + _weeks_in_year(year - 1, dow, doy), year - 1
    if week > _weeks_in_year(year, dow, doy):
        return week - _weeks_in_year(year, dow, doy), year + 1
    return week, year


def _offset(moment: datetime, sep: str) -> str:
    delta = moment.utcoffset() or timedelta(0)
    minutes = int(delta.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    minutes = abs(minutes)
    return f"{sign}{minutes // 60:02d}{sep}{minutes % 60:02d}"


def _token(tok: str, m: datetime) -> str:
    if tok[0] == "[":
        return tok[1:-1]
    if tok[0] == "\\" and len(tok) == 2:
        return tok[1]
    h12 = m.hour % 12 or 12
    simple = {
        "M": str(m.month),
        "Mo": _ordinal(m.month),
        "MM": f"{m.month:02d}",
        "MMM": _MONTHS[m.month - 1][:3],
        "MMMM": _MONTHS[m.month - 1],
        "D": str(m.day),
        "Do": _ordinal(m.day),
        "DD": f"{m.day:02d}",
        "d": str(_js_day(m)),
        "do": _ordinal(_js_day(m)),
        "dd": _DAYS[_js_day(m)][:2],
        "ddd": _DAYS[_js_day(m)][:3],
        "dddd": _DAYS[_js_day(m)],
        "e": str(_js_day(m)),
        "E": str(m.isoweekday()),
        "H": str(m.hour),
        "HH": f"{m.hour:02d}",
        "h": str(h12),
        "hh": f"{h12:02d}",
        "k": str(m.hour or 24),
        "kk": f"{m.hour or 24:02d}",
        "m": str(m.minute),
        "mm": f"{m.minute:02d}",
        "s": str(m.second),
        "ss": f"{m.second:02d}",
        "a": "am" if m.hour < 12 else "pm",
        "A": "AM" if m.hour < 12 else "PM",
        "Q": str((m.month - 1) // 3 + 1),
        "Qo": _ordinal((m.month - 1) // 3 + 1),
        "Z": _offset(m, ":"),
        "ZZ": _offset(m, ""),
        "X": str(math.floor(m.timestamp())),
        "x": str(math.floor(m.timestamp() * 1000)),
        "z": "",
        "zz": "",
    }
    if tok in simple:
        return simple[tok]
    yday = m.timetuple().tm_yday
    if tok in ("DDD", "DDDo", "DDDD"):
        return {"DDD": str(yday), "DDDo": _ordinal(yday), "DDDD": f"{yday:03d}"}[tok]
    if tok in ("YYYY", "yyyy"):
        return f"{m.year:04d}" if m.year <= 9999 else f"+{m.year}"
    if tok in ("YY", "yy"):
        return f"{m.year % 100:02d}"
    if tok in ("YYYYY", "YYYYYY", "yyy", "y", "yo"):
        return str(m.year)
    if tok[0] in "wW":
        dow, doy = (0, 6) if tok[0] == "w" else (1, 4)
        week, _ = _week(m, dow, doy)
        return {1: str(week), 2: f"{week:02d}"}[len(tok)] if tok[-1] != "o" else _ordinal(week)
    if tok[0] in "gG":
        dow, doy = (0, 6) if tok[0] == "g" else (1, 4)
        _, week_year = _week(m, dow, doy)
        return f"{week_year % 100:02d}" if len(tok) == 2 else f"{week_year:04d}"
    if tok[0] == "S":
        fraction = f"{m.microsecond:06d}000"
        return fraction[: len(tok)]
    return tok


def format_moment(moment: datetime, fmt: str) -> str:
    """``moment.format(fmt)`` in the English locale."""
    for _ in range(5):
        expanded = _LONG_RE.sub(
            lambda g: g.group(0) if g.group(1) or g.group(2) else _LONG[g.group(3)], fmt
        )
        if expanded == fmt:
            break
        fmt = expanded
    return "".join(_token(tok, moment) for tok in _TOKEN_RE.findall(fmt))


def humanize(milliseconds: float, *, with_suffix: bool = False) -> str:
    """``moment.duration(ms).humanize(withSuffix)`` with moment's default thresholds."""
    if math.isnan(milliseconds):
        return "Invalid date"
    ms = abs(milliseconds)
    days_exact = ms / 864e5

    def rnd(value: float) -> int:
        return math.floor(value + 0.5)

    seconds = rnd(ms / 1000)
    minutes = rnd(ms / 6e4)
    hours = rnd(ms / 36e5)
    days = rnd(days_exact)
    months = rnd(days_exact * 4800 / 146097)
    years = rnd(days_exact * 4800 / 146097 / 12)
    if seconds <= 44:
        text = "a few seconds"
    elif seconds < 45:
        text = f"{seconds} seconds"
    elif minutes <= 1:
        text = "a minute"
    elif minutes < 45:
        text = f"{minutes} minutes"
    elif hours <= 1:
        text = "an hour"
    elif hours < 22:
        text = f"{hours} hours"
    elif days <= 1:
        text = "a day"
    elif days < 26:
        text = f"{days} days"
    elif months <= 1:
        text = "a month"
    elif months < 11:
        text = f"{months} months"
    elif years <= 1:
        text = "a year"
    else:
        text = f"{years} years"
    if not with_suffix:
        return text
    return f"in {text}" if milliseconds > 0 else f"{text} ago"


_ISO = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)(?:[T ](\d\d)(?::(\d\d)(?::(\d\d)(?:[.,](\d{1,9}))?)?)?"
    r"(Z|[+-]\d\d(?::?\d\d)?)?)?"
)


def parse_moment(text: str, tz: object) -> datetime | None:
    """``moment(text)`` for ISO 8601 dates; local time (``tz``) when no offset is given."""
    m = _ISO.fullmatch(text.strip())
    if m is None:
        return None
    year, month, day, hour, minute, second, frac, zone = m.groups()
    try:
        value = datetime(
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            int((frac or "0").ljust(6, "0")[:6]),
        )
    except ValueError:
        return None
    if zone:
        if zone == "Z":
            return value.replace(tzinfo=UTC)
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
        return value.replace(tzinfo=timezone(sign * offset))
    return value.replace(tzinfo=tz)  # type: ignore[arg-type]
