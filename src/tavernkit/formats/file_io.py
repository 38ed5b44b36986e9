"""Shared plumbing of the format readers and writers: size limits, JSON and atomic writes."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tavernkit.errors import FormatError, LimitExceeded

__all__ = [
    "DEFAULT_LIMITS",
    "RATIO_FLOOR",
    "FormatLimits",
    "atomic_write_bytes",
    "check_text_sizes",
    "dump_json",
    "field_of",
    "load_json",
    "read_limited",
    "validation_error",
]

_MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class FormatLimits:
    """Upper bounds applied while reading untrusted files (guards against bombs).

    Compressed content (a CHARX's members, a PNG's ``zTXt``/``iTXt`` chunks) is capped three
    ways: per entry (``archive_member_bytes``; a card's text by ``card_json_bytes``), per
    file (``archive_unpacked_bytes``; a PNG's text chunks together at twice the card's), and
    by how much it may grow (``inflate_ratio`` times its compressed size, for anything over
    :data:`RATIO_FLOOR` bytes: a zip bomb of zeros grows a thousandfold, a real card's JSON or
    image a few times at most). Inflating stops at the cap, so memory stays near it."""

    card_json_bytes: int = 20 * _MB
    #: a lorebook file: SillyTavern's entry is ~940 bytes before its content, so a
    #: 20,000-entry book with a paragraph an entry is ~28 MB; the default admits ~9 times that
    lorebook_json_bytes: int = 256 * _MB
    image_bytes: int = 50 * _MB
    archive_unpacked_bytes: int = 100 * _MB
    archive_member_bytes: int = 32 * _MB
    archive_members: int = 10_000
    inflate_ratio: int = 100
    text_field_chars: int = 5 * _MB
    chat_file_bytes: int = 500 * _MB

    def inflated_cap(self, packed: int, limit: int) -> int:
        """The most ``packed`` compressed bytes may inflate to under ``limit`` and the ratio."""
        return min(limit, max(RATIO_FLOOR, packed * self.inflate_ratio))


#: below this many bytes, content may inflate by any ratio (small things compress well)
RATIO_FLOOR = 1 * _MB


DEFAULT_LIMITS = FormatLimits()


def read_limited(path: Path, limit: int, *, what: str = "file") -> bytes:
    """Read a whole file, refusing (before reading it) one larger than ``limit`` bytes."""
    try:
        size = path.stat().st_size
        if size > limit:
            raise LimitExceeded(
                f"{what} is {size} bytes, over the limit of {limit}", source=str(path)
            )
        return path.read_bytes()
    except OSError as exc:
        raise FormatError(f"cannot read {what}: {exc.strerror or exc}", source=str(path)) from exc


def load_json(data: bytes | str, *, source: str = "<bytes>", field: str | None = None) -> Any:
    """Parse JSON (UTF-8, a BOM tolerated) into Python values, or raise :class:`FormatError`."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise FormatError(
                f"not valid UTF-8 at byte {exc.start}", source=source, field=field
            ) from exc
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise FormatError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
            source=source,
            field=field,
        ) from exc
    except RecursionError as exc:
        raise FormatError("JSON nested too deeply", source=source, field=field) from exc


def dump_json(value: Any, *, indent: int | None = 4) -> str:
    """JSON the way SillyTavern writes its files (``JSON.stringify(v, null, 4)``): UTF-8, non-ASCII
    characters kept as they are."""
    return json.dumps(value, ensure_ascii=False, indent=indent)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never a part.

    The bytes go to a temporary file in the same folder, are flushed to disk, then renamed over
    the target; on any failure the temporary file is removed and the target is untouched.
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


def _join(path: str, part: int | str, *, dotted_indexes: bool) -> str:
    if isinstance(part, int) and not dotted_indexes:
        return f"{path}[{part}]"
    return f"{path}.{part}" if path else str(part)


def check_text_sizes(
    value: Any, limit: int, *, source: str, prefix: str = "", dotted_indexes: bool = False
) -> None:
    """Refuse any string longer than ``limit`` characters, naming where it sits (``a.b[2]``,
    or ``a.b.2`` with ``dotted_indexes``). Walked without recursion: a hostile file may nest
    deeply."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, str):
            if len(node) > limit:
                raise LimitExceeded(
                    f"text is {len(node)} characters, over the limit of {limit}",
                    source=source,
                    field=_prefixed(prefix, path),
                )
        elif isinstance(node, Mapping):
            stack.extend(
                (_join(path, str(k), dotted_indexes=dotted_indexes), v) for k, v in node.items()
            )
        elif isinstance(node, list):
            stack.extend(
                (_join(path, i, dotted_indexes=dotted_indexes), v) for i, v in enumerate(node)
            )


def _prefixed(prefix: str, path: str) -> str | None:
    """``prefix`` and ``path`` joined: a prefix ending in a space ("tEXt 'ccv3': ") is a label
    and is written as is, any other is the JSON path of the part that was validated."""
    if not prefix:
        return path or None
    if not path or prefix.endswith(" "):
        return (prefix + path).rstrip(": ") or None
    return f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path}"


def field_of(raw: Any, loc: Sequence[int | str], *, dotted_indexes: bool = False) -> str:
    """The part of a pydantic error location that exists in the input: pydantic appends union
    member names (``str``, ``int``) and tags that are not keys of the file."""
    path = ""
    node = raw
    for part in loc:
        if isinstance(node, Mapping) and str(part) in node:
            node = node[str(part)]
            path = _join(path, str(part), dotted_indexes=dotted_indexes)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
            path = _join(path, part, dotted_indexes=dotted_indexes)
        else:
            if isinstance(node, Mapping) and isinstance(part, str) and _is_key_name(part):
                path = _join(path, part, dotted_indexes=dotted_indexes)  # a missing field
            break
    return path


# Names pydantic puts into an error location for the member of a union that failed.
_UNION_TAGS = frozenset({"int", "float", "str", "bool", "list", "dict", "none"})


def _is_key_name(part: str) -> bool:
    return part not in _UNION_TAGS and "[" not in part and "-" not in part


def validation_error(
    exc: ValidationError,
    raw: Any,
    *,
    source: str,
    prefix: str = "",
    dotted_indexes: bool = False,
) -> FormatError:
    """A pydantic ``ValidationError`` on ``raw`` as a :class:`FormatError` naming the first
    bad field (and how many others were bad)."""
    errors = exc.errors(include_url=False)
    fields = [field_of(raw, e["loc"], dotted_indexes=dotted_indexes) for e in errors]
    others = len(set(fields)) - 1
    more = f" (and {others} more fields)" if others > 0 else ""
    return FormatError(
        f"{errors[0]['msg']}{more}", source=source, field=_prefixed(prefix, fields[0])
    )
