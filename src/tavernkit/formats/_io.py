"""Shared plumbing of the format readers and writers: size limits, JSON and atomic writes."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tavernkit.errors import FormatError, LimitExceeded

__all__ = [
    "DEFAULT_LIMITS",
    "FormatLimits",
    "atomic_write_bytes",
    "dump_json",
    "load_json",
    "read_limited",
]

_MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class FormatLimits:
    """Upper bounds applied while reading untrusted files (guards against bombs)."""

    card_json_bytes: int = 20 * _MB
    image_bytes: int = 50 * _MB
    archive_unpacked_bytes: int = 200 * _MB
    archive_members: int = 10_000
    text_field_chars: int = 5 * _MB
    chat_file_bytes: int = 500 * _MB


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
