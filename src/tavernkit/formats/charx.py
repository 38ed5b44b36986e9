"""CHARX archives: a zip holding ``card.json`` (a V3 card) and the files its assets point to.

Archives are untrusted: the member count, the declared sizes (per member, per archive, and
against each member's packed size: see :class:`~tavernkit.formats.file_io.FormatLimits`) and the
bytes actually inflated are all capped (a zip's headers can lie about sizes), member names that
could escape a folder
are refused, and every zip-library error becomes a :class:`FormatError`. Files made by
self-extracting tools (an executable stub before the zip) read like any other: the reader finds
the archive by its end record, wherever the zip starts.

This module knows the container only; :mod:`tavernkit.formats.cards` maps ``data.assets`` URIs
(``embeded://``, ``embedded://``, ``__asset:``) to members and back.
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tavernkit.errors import FormatError, LimitExceeded
from tavernkit.formats.file_io import DEFAULT_LIMITS, FormatLimits, dump_json, load_json

__all__ = [
    "CARD_MEMBER",
    "EMBEDDED_PREFIXES",
    "CharxArchive",
    "asset_member_path",
    "embedded_path",
    "is_zip",
    "read_charx",
    "safe_member_name",
    "write_charx",
]

CARD_MEMBER = "card.json"
#: URI prefixes naming a file inside the archive; ``embeded`` is the spec's own spelling.
EMBEDDED_PREFIXES = ("embeded://", "embedded://", "__asset:")
_ZIP_LOCAL = b"PK\x03\x04"
_ZIP_END = b"PK\x05\x06"
# The end record sits in the last 22 bytes plus a comment of at most 65535 bytes.
_END_SEARCH = 22 + 65535
_READ_BLOCK = 64 * 1024
# A fixed timestamp makes written archives byte-for-byte reproducible.
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


@dataclass(slots=True)
class CharxArchive:
    """The parsed ``card.json`` and every other member, by its (checked) path."""

    card_json: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)


def is_zip(data: bytes) -> bool:
    """A zip at the start, or a zip end record near the end (self-extracting archives)."""
    return data.startswith(_ZIP_LOCAL) or _ZIP_END in data[-_END_SEARCH:]


def embedded_path(uri: str) -> str | None:
    """The member path an asset URI points to, or ``None`` for URLs and ``ccdefault:``."""
    for prefix in EMBEDDED_PREFIXES:
        if uri.startswith(prefix):
            return uri[len(prefix) :]
    return None


def safe_member_name(name: str, *, source: str = "<bytes>") -> str:
    """``name`` with backslashes as slashes, or :class:`FormatError` if it could escape the
    folder it is extracted to (absolute, drive letter, ``..``, empty parts, NUL)."""
    norm = name.replace("\\", "/")
    parts = norm.split("/")
    if norm.endswith("/"):
        parts = parts[:-1]
    bad = (
        not norm
        or norm.startswith("/")
        or "\x00" in norm
        or re.match(r"^[A-Za-z]:", norm) is not None
        or any(p in ("", ".", "..") for p in parts)
    )
    if bad:
        raise FormatError(
            "unsafe member name (path traversal)", source=source, field=f"member {name!r}"
        )
    return norm


def _category(ext: str) -> str:
    ext = ext.lower()
    if ext in {"png", "jpg", "jpeg", "webp", "gif", "avif", "bmp", "svg"}:
        return "images"
    if ext in {"mp3", "ogg", "wav", "flac", "m4a", "opus"}:
        return "audio"
    if ext in {"mp4", "webm", "mkv", "mov"}:
        return "video"
    return "other"


def _slug(text: str, fallback: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")
    return slug or fallback


def asset_member_path(asset_type: str, name: str, ext: str) -> str:
    """Where a writer stores an asset: ``assets/<type>/<category>/<name>.<ext>``, the layout
    RisuAI and SillyTavern's CHARX exports use."""
    clean_ext = _slug(ext, "bin")
    base = f"assets/{_slug(asset_type, 'other')}/{_category(clean_ext)}/{_slug(name, 'asset')}"
    return f"{base}.{clean_ext}"


def read_charx(
    data: bytes, *, source: str = "<bytes>", limits: FormatLimits = DEFAULT_LIMITS
) -> CharxArchive:
    """Read a CHARX archive; see the module docstring for the guards."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            return _read_members(zf, source=source, limits=limits)
    except FormatError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
        raise FormatError(f"not a readable zip archive: {exc}", source=source) from exc
    except (NotImplementedError, RuntimeError) as exc:  # odd compression, encryption
        raise FormatError(f"unsupported zip archive: {exc}", source=source) from exc


def _read_members(zf: zipfile.ZipFile, *, source: str, limits: FormatLimits) -> CharxArchive:
    infos = [i for i in zf.infolist() if not i.is_dir()]
    if len(infos) > limits.archive_members:
        raise LimitExceeded(
            f"archive has {len(infos)} members, over the limit of {limits.archive_members}",
            source=source,
        )
    declared = sum(i.file_size for i in infos)
    if declared > limits.archive_unpacked_bytes:
        raise LimitExceeded(
            f"archive unpacks to {declared} bytes, over the limit of "
            f"{limits.archive_unpacked_bytes}",
            source=source,
        )
    by_name: dict[str, zipfile.ZipInfo] = {}
    for info in infos:
        _check_declared(info, limits, source=source)
        name = safe_member_name(info.filename, source=source)
        if name in by_name:
            raise FormatError("duplicate member name", source=source, field=f"member {name!r}")
        by_name[name] = info
    card_info = by_name.pop(CARD_MEMBER, None)
    if card_info is None:
        raise FormatError("CHARX archive has no card.json", source=source, field=CARD_MEMBER)
    budget = [limits.archive_unpacked_bytes]
    card_bytes = _read_member(
        zf, card_info, min(limits.card_json_bytes, budget[0]), budget, source=source
    )
    card_json = load_json(card_bytes, source=source, field=CARD_MEMBER)
    if not isinstance(card_json, dict):
        raise FormatError("card.json must hold a JSON object", source=source, field=CARD_MEMBER)
    if "spec" not in card_json:
        raise FormatError("card.json has no spec", source=source, field="spec")
    files = {
        name: _read_member(zf, info, budget[0], budget, source=source)
        for name, info in by_name.items()
    }
    return CharxArchive(card_json, files)


def _check_declared(info: zipfile.ZipInfo, limits: FormatLimits, *, source: str) -> None:
    """Refuse a member whose header declares more than a member may hold, or more growth
    than the ratio allows (before a byte of it is inflated)."""
    field_name = f"member {info.filename!r}"
    if info.file_size > limits.archive_member_bytes:
        raise LimitExceeded(
            f"member unpacks to {info.file_size} bytes, over the limit of "
            f"{limits.archive_member_bytes} per member",
            source=source,
            field=field_name,
        )
    if info.file_size > limits.inflated_cap(info.compress_size, info.file_size):
        raise LimitExceeded(
            f"member unpacks from {info.compress_size} to {info.file_size} bytes, more than "
            f"{limits.inflate_ratio} times its packed size (a zip bomb?)",
            source=source,
            field=field_name,
        )


def _read_member(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, budget: list[int], *, source: str
) -> bytes:
    """Inflate one member in blocks, stopping at ``limit`` or at its declared size, whichever
    is smaller: a member that inflates past what its header declares is a bomb or corrupt,
    and is refused after one block more than it declared."""
    cap = min(limit, info.file_size)
    field_name = f"member {info.filename!r}"
    if info.file_size > limit:
        raise LimitExceeded(
            f"member is {info.file_size} bytes, over the limit of {limit}",
            source=source,
            field=field_name,
        )
    chunks: list[bytes] = []
    total = 0
    with zf.open(info) as fh:
        while True:
            block = fh.read(min(_READ_BLOCK, cap - total + 1))
            if not block:
                break
            total += len(block)
            if total > cap:
                raise LimitExceeded(
                    "member inflates past its declared size", source=source, field=field_name
                )
            chunks.append(block)
    budget[0] -= total
    return b"".join(chunks)


def write_charx(card_json: Mapping[str, Any], files: Mapping[str, bytes]) -> bytes:
    """A CHARX archive: ``card.json`` (UTF-8, 4-space JSON) first, then ``files`` by path."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        _add(zf, CARD_MEMBER, dump_json(dict(card_json)).encode("utf-8"))
        for name, content in files.items():
            path = safe_member_name(name)
            if path == CARD_MEMBER:
                raise FormatError("an asset may not be named card.json", field=f"member {name!r}")
            _add(zf, path, content)
    return buf.getvalue()


def _add(zf: zipfile.ZipFile, name: str, content: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    zf.writestr(info, content)
