"""Text files with a few bytes that are not UTF-8 (a community preset saved with one cp1252
``’`` in it): read as SillyTavern reads them.

SillyTavern reads JSON files as UTF-8 with Node's decoder, which replaces each invalid
sequence with U+FFFD and goes on; the file imports and the bad character shows as ``�``.
:func:`repair_utf8` does the same to JSON-looking text (binary formats, a PNG or a CHARX
archive, are never touched: their bytes are not text) and names each replaced byte's offset
in a warning, so the user can find it in the original file.
"""

from __future__ import annotations

import logging

__all__ = ["MAX_LISTED", "repair_utf8"]

log = logging.getLogger("tavernkit.formats")

#: offsets named in the warning before it says "and N more"
MAX_LISTED = 5


def _looks_like_json_text(data: bytes) -> bool:
    return data[:64].lstrip(b"\xef\xbb\xbf \t\r\n").startswith((b"{", b"["))


def repair_utf8(data: bytes, *, source: str = "<bytes>") -> tuple[bytes, str | None]:
    """``data`` with every invalid UTF-8 sequence replaced by U+FFFD, and the warning naming
    the offsets (``None`` when nothing was replaced: valid UTF-8, or not JSON text)."""
    if not _looks_like_json_text(data):
        return data, None
    try:
        data.decode("utf-8")
        return data, None
    except UnicodeDecodeError:
        pass
    bad: list[tuple[int, bytes]] = []
    pos = 0
    pieces: list[str] = []
    while True:
        try:
            pieces.append(data[pos:].decode("utf-8"))
            break
        except UnicodeDecodeError as exc:
            start, end = pos + exc.start, pos + exc.end
            pieces.append(data[pos:start].decode("utf-8"))
            pieces.append("\ufffd")
            bad.append((start, data[start:end]))
            pos = end
    listed = ", ".join(f"0x{raw.hex()} at byte {offset}" for offset, raw in bad[:MAX_LISTED])
    more = f" and {len(bad) - MAX_LISTED} more" if len(bad) > MAX_LISTED else ""
    warning = (
        f"{source}: {len(bad)} byte sequence(s) not valid UTF-8 replaced with U+FFFD "
        f"({listed}{more}), as SillyTavern reads the file"
    )
    log.warning("%s", warning)
    return "".join(pieces).encode("utf-8"), warning
