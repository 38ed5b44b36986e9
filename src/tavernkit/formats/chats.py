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
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from tavernkit.errors import FormatError, LimitExceeded, NotStreamable
from tavernkit.formats.file_io import DEFAULT_LIMITS, FormatLimits, atomic_write_bytes, read_limited
from tavernkit.models.chat import Chat, ChatHeader, Message
from tavernkit.models.send_date import format_send_date, parse_send_date

__all__ = [
    "NotStreamable",
    "chat_to_jsonl",
    "format_send_date",
    "is_chat_jsonl",
    "iter_chat_file",
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


def iter_chat_file(
    file: BinaryIO, *, source: str, limits: FormatLimits = DEFAULT_LIMITS, batch: int = 500
) -> Iterator[ChatHeader | list[Message]]:
    """Read a ``.jsonl`` chat from ``file`` a line at a time: first its header, then its
    messages in lists of at most ``batch``; what is held is one batch, never the file. Lines
    are checked as :func:`read_chat_jsonl` checks them (same errors, naming the line); a file
    past ``limits.chat_file_bytes`` is refused when the reading gets there. A line that is not
    UTF-8 raises :class:`NotStreamable`."""
    read = 0
    header: ChatHeader | None = None
    messages: list[Message] = []
    for number, raw in enumerate(file, start=1):
        read += len(raw)
        if read > limits.chat_file_bytes:
            raise LimitExceeded(
                f"chat is over the limit of {limits.chat_file_bytes} bytes", source=source
            )
        try:
            line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError:
            raise NotStreamable(f"line {number} is not UTF-8") from None
        if not line.strip():
            continue
        value = _parse_line(line.removesuffix("\n"), number, source, limits)
        if header is None:
            if _is_headerless_message(value):
                header = ChatHeader.new()
                yield header
            else:
                header = _validate(ChatHeader, value, number, source)
                yield header
                continue
        messages.append(_validate(Message, value, number, source))
        if len(messages) >= batch:
            yield messages
            messages = []
    if header is None:
        raise FormatError("empty chat: no header line", source=source, field="line 1")
    if messages:
        yield messages


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
