"""SillyTavern chat files (``.jsonl``): read, write, detect, and the ``send_date`` formats.

A chat file is UTF-8 JSON Lines joined with ``"\\n"`` and no trailing newline: line 1 is the
header (``chat_metadata`` and the names), every later line one message. Where SillyTavern's
reader silently drops a line that does not parse, ours raises :class:`FormatError` naming the
line: a chat that quietly loses messages is worse than one that refuses to load. Blank lines
(a trailing newline, an editor's stray empty line) hold no data and are skipped.

A file whose first line is a message rather than a header (it has ``mes`` and no header key) is
read with a fresh header; SillyTavern itself would take that first message for the header and
lose it, so our writer always writes a header line.

Writing is the mirror image: every line is ``JSON.stringify`` output (no spaces, non-ASCII kept,
lone surrogates escaped as JavaScript does), so read -> write keeps every line's JSON values
and key order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from tavernkit.errors import FormatError, LimitExceeded
from tavernkit.formats._io import DEFAULT_LIMITS, FormatLimits, atomic_write_bytes, read_limited
from tavernkit.models.chat import Chat, ChatHeader, Message

__all__ = [
    "chat_to_jsonl",
    "format_send_date",
    "is_chat_jsonl",
    "parse_send_date",
    "read_chat_file",
    "read_chat_jsonl",
    "write_chat_jsonl",
]

#: Keys only a header line has; a first line with ``mes`` and none of these is a message.
_M = TypeVar("_M", ChatHeader, Message)

_HEADER_KEYS = frozenset({"chat_metadata", "user_name", "character_name", "create_date"})


# --- reading ---------------------------------------------------------------------------------


def read_chat_jsonl(
    data: bytes | str, *, source: str = "<bytes>", limits: FormatLimits = DEFAULT_LIMITS
) -> Chat:
    """Parse a SillyTavern ``.jsonl`` chat. Raises :class:`FormatError` (field ``"line N"``)
    for a line that is not JSON, not an object or not a valid message, for bad UTF-8, and
    :class:`LimitExceeded` for a file or text field over ``limits``."""
    if len(data) > limits.chat_file_bytes:
        raise LimitExceeded(
            f"chat is {len(data)} bytes, over the limit of {limits.chat_file_bytes}",
            source=source,
        )
    text = _decode(data, source)
    header: ChatHeader | None = None
    messages: list[Message] = []
    for number, line in _numbered_lines(text):
        value = _parse_line(line, number, source, limits)
        if header is None:
            if _is_headerless_message(value):
                header = ChatHeader.new()
            else:
                header = _validate(ChatHeader, value, number, source)
                continue
        messages.append(_validate(Message, value, number, source))
    if header is None:
        raise FormatError("empty chat: no header line", source=source, field="line 1")
    return Chat(header=header, messages=messages)


def read_chat_file(path: Path, *, limits: FormatLimits = DEFAULT_LIMITS) -> Chat:
    """Read a ``.jsonl`` chat file (refusing one over ``limits.chat_file_bytes`` unread)."""
    data = read_limited(Path(path), limits.chat_file_bytes, what="chat file")
    return read_chat_jsonl(data, source=str(path), limits=limits)


def is_chat_jsonl(data: bytes | str) -> bool:
    """Whether ``data`` looks like a SillyTavern chat: its first line is a JSON object that is a
    chat header (or, in a header-less file, a message). Only the first line is parsed."""
    if isinstance(data, bytes):
        end = data.find(b"\n")
        head = data if end < 0 else data[:end]
        try:
            first = head.decode("utf-8-sig")
        except UnicodeDecodeError:
            return False
    else:
        end = data.find("\n")
        first = (data if end < 0 else data[:end]).lstrip("\ufeff")
    if not first.strip():
        return False
    try:
        value = json.loads(first)
    except (ValueError, RecursionError):
        return False
    if not isinstance(value, dict):
        return False
    if "chat_metadata" in value or {"user_name", "character_name"} <= value.keys():
        return True
    return _is_headerless_message(value) and "is_user" in value


def _decode(data: bytes | str, source: str) -> str:
    if isinstance(data, str):
        return data.removeprefix("\ufeff")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise FormatError(
            f"line {line}: not valid UTF-8 at byte {exc.start}", source=source, field=f"line {line}"
        ) from exc


def _numbered_lines(text: str) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield number, line


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; JavaScript's JSON.parse (SillyTavern) rejects them too.
    raise ValueError(f"{name} is not valid JSON")


def _parse_line(line: str, number: int, source: str, limits: FormatLimits) -> dict[str, Any]:
    where = f"line {number}"
    try:
        value = json.loads(line, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise FormatError(
            f"{where}: invalid JSON at column {exc.colno}: {exc.msg}", source=source, field=where
        ) from exc
    except ValueError as exc:
        raise FormatError(f"{where}: {exc}", source=source, field=where) from exc
    except RecursionError as exc:
        raise FormatError(f"{where}: JSON nested too deeply", source=source, field=where) from exc
    if not isinstance(value, dict):
        what = "header" if number == 1 else "message"
        raise FormatError(
            f"{where}: the {what} is a JSON {type(value).__name__}, not an object",
            source=source,
            field=where,
        )
    _check_text_sizes(value, number, source, limits)
    return value


def _check_text_sizes(value: Any, number: int, source: str, limits: FormatLimits) -> None:
    """Refuse any string longer than ``limits.text_field_chars`` (a guard against files that
    would make every later step, from prompts to token counting, choke)."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if len(item) > limits.text_field_chars:
                field = f"line {number}: {path}"
                raise LimitExceeded(
                    f"line {number}: text field {path} has {len(item)} characters, "
                    f"over the limit of {limits.text_field_chars}",
                    source=source,
                    field=field,
                )
        elif isinstance(item, dict):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(item))


def _is_headerless_message(value: dict[str, Any]) -> bool:
    return "mes" in value and not _HEADER_KEYS & value.keys()


def _validate(model: type[_M], value: dict[str, Any], number: int, source: str) -> _M:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        error = exc.errors()[0]
        path = _error_path(value, error["loc"])
        field = f"line {number}: {path}" if path else f"line {number}"
        what = "header" if model is ChatHeader else "message"
        raise FormatError(
            f"line {number}: invalid {what}"
            + (f" field {path}" if path else "")
            + f": {error['msg']}",
            source=source,
            field=field,
        ) from exc


def _error_path(value: Any, loc: tuple[int | str, ...]) -> str:
    """The JSON path of a validation error, leaving out pydantic's union-member tags (which
    are not keys of the input)."""
    path = ""
    current = value
    for step in loc:
        if isinstance(current, dict) and isinstance(step, str) and step in current:
            path = f"{path}.{step}" if path else step
            current = current[step]
        elif isinstance(current, list) and isinstance(step, int) and 0 <= step < len(current):
            path = f"{path}[{step}]"
            current = current[step]
    return path


# --- writing ---------------------------------------------------------------------------------


_SURROGATE = re.compile("[\ud800-\udfff]")


def _stringify(value: Any) -> str:
    """``JSON.stringify(value)``: no spaces, non-ASCII as is, lone surrogates escaped."""
    out = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", out)


def chat_to_jsonl(chat: Chat) -> str:
    """The chat as SillyTavern's ``.jsonl``: header line first, one line per message, joined
    with ``"\\n"`` and no trailing newline. Multimodal messages are written the way SillyTavern
    stores them (text in ``mes``, images in ``extra.media``; see ``Message.to_st``)."""
    lines = [_line(chat.header, "header")]
    lines.extend(
        _line(message.to_st(), f"messages[{index}]") for index, message in enumerate(chat.messages)
    )
    return "\n".join(lines)


def _line(record: ChatHeader | Message, field: str) -> str:
    try:
        return _stringify(record.to_wire())
    except (ValueError, TypeError, PydanticSerializationError) as exc:
        # NaN, infinities or non-JSON objects put into extras by code: not writable as JSON.
        raise FormatError(f"cannot be written as JSON: {exc}", field=field) from exc


def write_chat_jsonl(chat: Chat, path: Path) -> None:
    """Write the chat to ``path`` atomically (the old file stays whole if anything fails)."""
    atomic_write_bytes(Path(path), chat_to_jsonl(chat).encode("utf-8"))


# --- send_date -------------------------------------------------------------------------------


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
