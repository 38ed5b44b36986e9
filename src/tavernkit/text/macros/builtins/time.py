"""Time and date macros: an injected clock and time zone, moment's formats and humanize."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from tavernkit.text.macros.registry import ArgSpec, MacroCall, MacroRegistry, MacroRuntimeError
from tavernkit.text.macros.timefmt import format_moment, humanize, parse_moment

__all__ = ["register"]

_UTC_OFFSET = re.compile(r"UTC([+-]\d+(?:\.\d+)?)", re.IGNORECASE)


def _now(call: MacroCall) -> datetime:
    env = call.env
    return env.clock().astimezone(env.tz)


def _time(call: MacroCall) -> str:
    if not call.args:
        return format_moment(_now(call), "LT")
    m = _UTC_OFFSET.fullmatch(call.args[0].strip())
    if m is None:
        raise MacroRuntimeError(f"expected an offset like UTC+2, got {call.args[0]!r}")
    utc = call.env.clock().astimezone(UTC).replace(tzinfo=None)
    return format_moment(utc + timedelta(hours=float(m.group(1))), "LT")


def _fmt(fmt: str):  # type: ignore[no-untyped-def]
    return lambda call: format_moment(_now(call), fmt)


def _idle(call: MacroCall) -> str:
    since = call.env.idle_since
    if since is None:
        return "just now"
    delta = call.env.clock() - since
    return humanize(delta.total_seconds() * 1000)


def _time_diff(call: MacroCall) -> str:
    tz = call.env.tz
    a = parse_moment(call.args[0], tz)
    b = parse_moment(call.args[1], tz)
    if a is None or b is None:
        return "Invalid date"
    return humanize((a - b).total_seconds() * 1000, with_suffix=True)


def register(registry: MacroRegistry) -> None:
    registry.register(
        "time",
        _time,
        args=[_optional("offset")],
        category="time",
        description="The current time (h:mm A), optionally at UTC±N.",
    )
    registry.register("date", _fmt("LL"), category="time", description="Today (MMMM D, YYYY).")
    registry.register("weekday", _fmt("dddd"), category="time", description="Today's weekday.")
    registry.register("isotime", _fmt("HH:mm"), category="time", description="HH:mm.")
    registry.register("isodate", _fmt("YYYY-MM-DD"), category="time", description="YYYY-MM-DD.")
    registry.register(
        "datetimeformat",
        lambda c: format_moment(_now(c), c.args[0]),
        args=["format"],
        category="time",
        description="The current time in a moment.js format.",
    )
    registry.register(
        "idleDuration",
        _idle,
        aliases=["idle_duration"],
        category="time",
        description="Time since the user's last message, humanized.",
    )
    registry.register(
        "timeDiff",
        _time_diff,
        args=["a", "b"],
        category="time",
        description="Humanized difference a - b ('in 3 hours', '2 days ago').",
    )


def _optional(name: str):  # type: ignore[no-untyped-def]

    return ArgSpec(name, optional=True)
