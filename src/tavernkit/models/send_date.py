"""SillyTavern's ``send_date`` formats: the forms a message's date has been stored in
(ISO strings, epoch milliseconds, the humanized "July 12, 2024 1:31am"), parsed, and the one
SillyTavern 1.18 writes. Here, below the models, because :class:`~tavernkit.models.chat.Message`
reads its own date; :mod:`tavernkit.formats.chats` re-exports both functions."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo

__all__ = ["format_send_date", "parse_send_date"]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}

# "June 19, 2023 2:20pm" (the message time stamp of 2023-era SillyTavern and TavernAI)
_MERIDIEM = re.compile(
    r"([A-Za-z]+)\.?\s+(\d{1,2}),\s*(\d{4})\s+(\d{1,2}):(\d{1,2})\s*([ap]m)", re.IGNORECASE
)
# "2024-07-12@01h31m37s123ms", "2024-7-12@01h31m37s", "2024-6-5 @14h 56m 50s 682ms"
_HUMANIZED = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})\s*@(\d{1,2})h\s*(\d{1,2})m\s*(\d{1,2})s(?:\s*(\d{1,3})ms)?"
)
_ISO_START = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_send_date(value: object, *, tz: tzinfo = UTC) -> datetime | None:
    """A message date in any format SillyTavern has written, as an aware datetime.

    Accepts ISO 8601 (what 1.18 writes), epoch milliseconds (a number or a string of digits),
    ``"June 19, 2023 2:20pm"``, ``"2024-07-12@01h31m37s123ms"`` and the spaced
    ``"2024-6-5 @14h 56m 50s 682ms"`` (each of the humanized forms with or without the
    milliseconds and the spaces). Epoch 0 is "no date", as falsy values are to SillyTavern.
    Formats without a zone were local time on the machine
    that wrote them; they are read in ``tz``. Returns ``None`` for anything unreadable (as
    SillyTavern shows an invalid date rather than failing).
    """
    if isinstance(value, bool) or not value:
        return None
    if isinstance(value, int | float):
        return _from_epoch_ms(value)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return _from_epoch_ms(int(text)) if int(text) else None
    try:
        if match := _HUMANIZED.search(text):
            year, month, day, hour, minute, second, ms = match.groups()
            return datetime(
                int(year),
                int(month),
                int(day),
                int(hour),
                int(minute),
                int(second),
                int(ms or 0) * 1000,
                tzinfo=tz,
            )
        if match := _MERIDIEM.search(text):
            month_name, day, year, hour, minute, meridiem = match.groups()
            month_number = _MONTHS.get(month_name.lower())
            if month_number is None:
                return None
            hour24 = int(hour) % 12 + (12 if meridiem.lower() == "pm" else 0)
            return datetime(int(year), month_number, int(day), hour24, int(minute), tzinfo=tz)
        if _ISO_START.match(text):
            parsed = datetime.fromisoformat(text)
            return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=tz)
    except ValueError:
        return None
    return None


def _from_epoch_ms(value: float) -> datetime | None:
    try:
        return _EPOCH + timedelta(milliseconds=value)
    except (OverflowError, ValueError):
        return None


def format_send_date(moment: datetime) -> str:
    """``moment`` as JavaScript's ``Date.prototype.toISOString`` writes it (UTC, milliseconds,
    ``Z``), the form SillyTavern 1.18 stores. A naive datetime is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}."
        f"{moment.microsecond // 1000:03d}Z"
    )
