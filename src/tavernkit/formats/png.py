"""PNG chunks: reading text chunks and swapping them without touching the image.

A card PNG carries the card as base64 JSON in ``tEXt`` chunks named ``chara`` (V2) and ``ccv3``
(V3). SillyTavern re-encodes the whole image whenever it writes a card; here every chunk other
than the card's text chunks is copied byte for byte (its CRC too), so the pixels, colour
profile and metadata of the picture stay exactly as they were.

CRC policy: a text chunk we read (any ``tEXt``/``zTXt``/``iTXt``) must have a correct CRC, or
:class:`FormatError` names it; the CRCs of other chunks are not checked, because we never decode
them and copy them unchanged (an image viewer is the judge of those).
"""

from __future__ import annotations

import base64
import binascii
import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tavernkit.errors import FormatError, LimitExceeded
from tavernkit.formats.file_io import DEFAULT_LIMITS, FormatLimits

__all__ = [
    "PNG_SIGNATURE",
    "TEXT_CHUNK_TYPES",
    "ParsedPng",
    "PngChunk",
    "TextChunk",
    "decode_base64_text",
    "is_png",
    "make_chunk",
    "parse_chunks",
    "placeholder_png",
    "read_text_chunks",
    "replace_text_chunks",
]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TEXT_CHUNK_TYPES = frozenset({b"tEXt", b"zTXt", b"iTXt"})
_MAX_CHUNK_LENGTH = 2**31 - 1
_INFLATE_BLOCK = 256 * 1024


@dataclass(frozen=True, slots=True)
class PngChunk:
    """One chunk: ``raw`` is its complete bytes in the file (length, type, data, CRC)."""

    type: bytes
    data: bytes
    raw: bytes
    offset: int

    @property
    def name(self) -> str:
        return self.type.decode("latin-1")

    def crc_ok(self) -> bool:
        stored: int = struct.unpack(">I", self.raw[-4:])[0]
        return zlib.crc32(self.type + self.data) == stored


@dataclass(frozen=True, slots=True)
class TextChunk:
    """A decoded text chunk; ``keyword`` is as written (compare it case-insensitively)."""

    keyword: str
    text: str
    chunk_type: str


@dataclass(frozen=True, slots=True)
class ParsedPng:
    """The chunks up to and including IEND, and any bytes after IEND (kept when rewriting)."""

    chunks: tuple[PngChunk, ...]
    trailer: bytes


def is_png(data: bytes) -> bool:
    return data.startswith(PNG_SIGNATURE)


def parse_chunks(
    data: bytes, *, source: str = "<bytes>", limits: FormatLimits = DEFAULT_LIMITS
) -> ParsedPng:
    """Split a PNG file into chunks; a bad signature, a truncated chunk, or no IEND (or no
    IHDR first) raises :class:`FormatError` naming the chunk."""
    if len(data) > limits.image_bytes:
        raise LimitExceeded(
            f"PNG is {len(data)} bytes, over the limit of {limits.image_bytes}", source=source
        )
    if not is_png(data):
        raise FormatError("not a PNG file (bad signature)", source=source, field="signature")
    chunks: list[PngChunk] = []
    pos = len(PNG_SIGNATURE)
    while True:
        label = f"chunk #{len(chunks)}"
        if pos + 8 > len(data):
            what = "no IEND chunk" if pos == len(data) else f"truncated header of {label}"
            raise FormatError(f"truncated PNG: {what}", source=source, field=label)
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        ctype = data[pos + 4 : pos + 8]
        if not ctype.isalpha():
            raise FormatError(f"invalid chunk type {ctype!r}", source=source, field=label)
        label = f"chunk #{len(chunks)} {ctype.decode('ascii')}"
        if length > _MAX_CHUNK_LENGTH:
            raise FormatError(f"chunk length {length} is invalid", source=source, field=label)
        end = pos + 12 + length
        if end > len(data):
            raise FormatError("truncated PNG: chunk runs past the end", source=source, field=label)
        chunks.append(PngChunk(ctype, data[pos + 8 : pos + 8 + length], data[pos:end], pos))
        pos = end
        if ctype == b"IEND":
            break
    if chunks[0].type != b"IHDR":
        raise FormatError("the first chunk must be IHDR", source=source, field="chunk #0")
    return ParsedPng(tuple(chunks), data[pos:])


def _split_keyword(body: bytes, *, source: str, field: str) -> tuple[str, bytes]:
    sep = body.find(b"\x00")
    if sep < 1 or sep > 79:
        raise FormatError("text chunk has no valid keyword", source=source, field=field)
    return body[:sep].decode("latin-1"), body[sep + 1 :]


def _inflate(
    data: bytes, limit: int, *, source: str, field: str, limits: FormatLimits = DEFAULT_LIMITS
) -> bytes:
    """zlib-decompress with an output cap (a compressed text chunk can be a bomb): at most
    ``limit`` bytes, and at most ``limits.inflate_ratio`` times the compressed size; the
    inflater stops one byte past the cap, so memory stays near it."""
    cap = limits.inflated_cap(len(data), limit)
    inflater = zlib.decompressobj()
    out = bytearray()
    pending = data
    try:
        # in blocks into one growing buffer: what is held is the text so far, never twice
        while len(out) <= cap and not inflater.eof:
            block = inflater.decompress(pending, _INFLATE_BLOCK)
            pending = inflater.unconsumed_tail
            if not block and not pending:
                break
            out += block
    except zlib.error as exc:
        raise FormatError(f"bad compressed text: {exc}", source=source, field=field) from exc
    if len(out) > cap:
        why = (
            f"the limit of {limit} bytes"
            if cap == limit
            else f"{limits.inflate_ratio} times its {len(data)} compressed bytes (a bomb?)"
        )
        raise LimitExceeded(f"compressed text inflates past {why}", source=source, field=field)
    return bytes(out)


def _decode_text_chunk(
    chunk: PngChunk,
    *,
    source: str,
    limit: int,
    index: int,
    limits: FormatLimits = DEFAULT_LIMITS,
) -> TextChunk:
    field = f"chunk #{index} {chunk.name}"
    keyword, rest = _split_keyword(chunk.data, source=source, field=field)
    field = f"{chunk.name} {keyword!r}"
    if not chunk.crc_ok():
        raise FormatError("CRC mismatch (the chunk is corrupt)", source=source, field=field)
    if chunk.type == b"tEXt":
        raw, encoding = rest, "latin-1"
    elif chunk.type == b"zTXt":
        if not rest or rest[0] != 0:
            raise FormatError("unknown compression method", source=source, field=field)
        raw = _inflate(rest[1:], limit, source=source, field=field, limits=limits)
        encoding = "latin-1"
    else:  # iTXt: flag, method, language\0, translated keyword\0, UTF-8 text
        if len(rest) < 2:
            raise FormatError("truncated iTXt header", source=source, field=field)
        flag, method, tail = rest[0], rest[1], rest[2:]
        parts = tail.split(b"\x00", 2)
        if len(parts) != 3:
            raise FormatError("truncated iTXt header", source=source, field=field)
        raw = parts[2]
        if flag:
            if method != 0:
                raise FormatError("unknown compression method", source=source, field=field)
            raw = _inflate(raw, limit, source=source, field=field, limits=limits)
        encoding = "utf-8"
    if len(raw) > limit:
        raise LimitExceeded(
            f"text is {len(raw)} bytes, over the limit of {limit}", source=source, field=field
        )
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise FormatError(
            f"text is not valid UTF-8 at byte {exc.start}", source=source, field=field
        ) from exc
    return TextChunk(keyword, text, chunk.name)


def read_text_chunks(
    data: bytes,
    *,
    keywords: Iterable[str] | None = None,
    source: str = "<bytes>",
    limits: FormatLimits = DEFAULT_LIMITS,
) -> list[TextChunk]:
    """The text chunks of a PNG in file order; with ``keywords``, only those (compared
    case-insensitively), and only those are decoded and CRC-checked."""
    wanted = None if keywords is None else {k.lower() for k in keywords}
    parsed = parse_chunks(data, source=source, limits=limits)
    # Card chunks hold base64, a third larger than the JSON the card limit is about; a card
    # PNG holds it twice (V2 and V3), so all text read from one file is held to twice that.
    text_limit = limits.card_json_bytes * 4 // 3 + 16
    budget = 2 * text_limit
    out: list[TextChunk] = []
    for index, chunk in enumerate(parsed.chunks):
        if chunk.type not in TEXT_CHUNK_TYPES:
            continue
        if wanted is not None and _raw_keyword(chunk).lower() not in wanted:
            continue
        text = _decode_text_chunk(
            chunk, source=source, limit=text_limit, index=index, limits=limits
        )
        budget -= len(text.text)
        if budget < 0:
            raise LimitExceeded(
                f"the text chunks hold more than {2 * text_limit} bytes together",
                source=source,
                field=f"chunk #{index} {chunk.name}",
            )
        out.append(text)
    return out


def _raw_keyword(chunk: PngChunk) -> str:
    sep = chunk.data.find(b"\x00")
    return chunk.data[:sep].decode("latin-1") if sep > 0 else ""


def decode_base64_text(
    text: str, *, source: str = "<bytes>", field: str | None = None, limit: int | None = None
) -> bytes:
    """Base64 as card writers produce it: whitespace and missing padding tolerated, any other
    stray character is an error (Node's decoder would silently drop it and read garbage)."""
    compact = "".join(text.split())
    if limit is not None and len(compact) // 4 * 3 > limit:
        raise LimitExceeded(
            f"encoded text decodes to more than the limit of {limit} bytes",
            source=source,
            field=field,
        )
    compact += "=" * (-len(compact) % 4)
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise FormatError(f"invalid base64: {exc}", source=source, field=field) from exc


def make_chunk(ctype: bytes, data: bytes) -> bytes:
    """A complete chunk (length, type, data, CRC)."""
    return struct.pack(">I", len(data)) + ctype + data + struct.pack(">I", zlib.crc32(ctype + data))


def _text_chunk(keyword: str, text: str) -> bytes:
    try:
        body = keyword.encode("latin-1") + b"\x00" + text.encode("latin-1")
    except UnicodeEncodeError as exc:
        raise FormatError(
            "tEXt chunks hold Latin-1 only (encode the value first)", field=keyword
        ) from exc
    return make_chunk(b"tEXt", body)


def replace_text_chunks(
    data: bytes,
    new: Sequence[tuple[str, str]],
    *,
    remove: Iterable[str] = (),
    source: str = "<bytes>",
    limits: FormatLimits = DEFAULT_LIMITS,
) -> bytes:
    """The same PNG with every text chunk whose keyword is in ``remove`` (case-insensitive,
    any of tEXt/zTXt/iTXt) dropped and ``new`` ``(keyword, latin-1 text)`` tEXt chunks
    inserted, in order, just before IEND. All other bytes are copied unchanged."""
    drop = {k.lower() for k in remove}
    parsed = parse_chunks(data, source=source, limits=limits)
    out = [PNG_SIGNATURE]
    for chunk in parsed.chunks:
        if chunk.type == b"IEND":
            out.extend(_text_chunk(k, t) for k, t in new)
        elif chunk.type in TEXT_CHUNK_TYPES and _raw_keyword(chunk).lower() in drop:
            continue
        out.append(chunk.raw)
    out.append(parsed.trailer)
    return b"".join(out)


def placeholder_png(width: int = 100, height: int = 150) -> bytes:
    """A small valid RGB PNG (a soft vertical gradient) for cards written without an image."""
    rows = []
    for y in range(height):
        shade = 0x40 + (0x50 * y) // max(height - 1, 1)
        rows.append(b"\x00" + bytes((shade, shade // 2 + 0x20, 0x70)) * width)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"".join(
        (
            PNG_SIGNATURE,
            make_chunk(b"IHDR", ihdr),
            make_chunk(b"IDAT", zlib.compress(b"".join(rows), 9)),
            make_chunk(b"IEND", b""),
        )
    )
