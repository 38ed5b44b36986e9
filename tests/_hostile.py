"""Hostile files for the bomb tests (issue 34, finding 4), built in the test, streamed so the
test itself never holds what they unpack to."""

from __future__ import annotations

import base64
import io
import json
import random
import struct
import zipfile
import zlib
from typing import Any

from tavernkit.formats.png import PNG_SIGNATURE, make_chunk

MiB = 1024 * 1024

CARD_V3: dict[str, Any] = {
    "spec": "chara_card_v3",
    "spec_version": "3.0",
    "data": {
        "name": "Bomb",
        "first_mes": "hello",
        "assets": [
            {
                "type": "icon",
                "uri": "embeded://assets/icon/images/main.png",
                "name": "main",
                "ext": "png",
            }
        ],
    },
}


def zeros_charx(unpacked: int, *, member: str = "assets/icon/images/main.png") -> bytes:
    """A CHARX whose main icon is ``unpacked`` zero bytes, deflated (headers honest): the
    issue's 189 KiB archive of 190 MiB."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("card.json", json.dumps(CARD_V3))
        info = zipfile.ZipInfo(member, date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        block = bytes(MiB)
        with zf.open(info, "w", force_zip64=True) as out:
            left = unpacked
            while left > 0:
                out.write(block[: min(left, MiB)])
                left -= MiB
    return buf.getvalue()


def lying_charx(declared: int, unpacked: int) -> bytes:
    """A CHARX whose main icon's headers declare ``declared`` bytes and whose data inflates to
    ``unpacked`` (zeros)."""
    data = bytearray(zeros_charx(unpacked))
    name = b"assets/icon/images/main.png"
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = 0
        while (at := data.find(signature, at)) >= 0:
            name_len = struct.unpack("<H", data[at + offset + 4 : at + offset + 6])[0]
            start = at + (30 if signature == b"PK\x03\x04" else 46)
            if bytes(data[start : start + name_len]) == name:
                size = struct.unpack("<I", data[at + offset : at + offset + 4])[0]
                if size != 0xFFFFFFFF:
                    data[at + offset : at + offset + 4] = struct.pack("<I", declared)
            at += 4
    return bytes(data)


def noise(width: int, height: int, seed: int = 0) -> bytes:
    """IDAT data of ``width`` x ``height`` RGB pixels of noise (it does not compress)."""
    rng = random.Random(seed)
    return zlib.compress(b"".join(b"\x00" + rng.randbytes(width * 3) for _ in range(height)))


def png(width: int, height: int, idat: bytes | None = None, *chunks: bytes) -> bytes:
    """A PNG declaring ``width`` x ``height`` RGB pixels: ``idat`` as its data (default: a
    gradient's rows), ``chunks`` before IDAT."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    if idat is None:  # a gradient, row after row
        row = (bytes(range(256)) * (width * 3 // 256 + 1))[: width * 3]
        idat = zlib.compress((b"\x00" + row) * height, 6)
    return b"".join(
        (
            PNG_SIGNATURE,
            make_chunk(b"IHDR", ihdr),
            *chunks,
            make_chunk(b"IDAT", idat),
            make_chunk(b"IEND", b""),
        )
    )


def card_chunk(card: dict[str, Any] | None = None) -> bytes:
    text = base64.b64encode(json.dumps(card or CARD_V3).encode()).decode()
    return make_chunk(b"tEXt", b"chara\x00" + text.encode("latin-1"))


def pixel_bomb_png_card() -> bytes:
    """A 50000 x 50000 PNG card whose image data is a few bytes (a decompression bomb)."""
    return png(50_000, 50_000, zlib.compress(b"\x00" * 1000), card_chunk())


def ztxt_bomb_png(unpacked: int, *, keyword: bytes = b"chara") -> bytes:
    """A small PNG card with a ``zTXt`` chunk of ``unpacked`` deflated zero bytes."""
    packer = zlib.compressobj(9)
    parts = []
    block = bytes(MiB)
    left = unpacked
    while left > 0:
        parts.append(packer.compress(block[: min(left, MiB)]))
        left -= MiB
    parts.append(packer.flush())
    body = keyword + b"\x00\x00" + b"".join(parts)
    return png(8, 8, None, make_chunk(b"zTXt", body))
