"""CHARX container: round trips, self-extracting prefixes, and the guards against hostile zips."""

from __future__ import annotations

import io
import json
import struct
import warnings
import zipfile
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tavernkit.errors import FormatError, LimitExceeded
from tavernkit.formats.charx import (
    asset_member_path,
    embedded_path,
    is_zip,
    read_charx,
    safe_member_name,
    write_charx,
)
from tavernkit.formats.file_io import FormatLimits

CARD = {"spec": "chara_card_v3", "spec_version": "3.0", "data": {"name": "Zip"}}


def _zip(members: dict[str, bytes], *, method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names warn; some tests want them
        with zipfile.ZipFile(buf, "w", compression=method) as zf:
            for name, content in members.items():
                zf.writestr(name, content)
    return buf.getvalue()


def _card_bytes(card: dict[str, Any] | None = None) -> bytes:
    return json.dumps(card or CARD).encode()


def test_round_trip_with_assets() -> None:
    files = {"assets/icon/images/main.png": b"\x89PNG fake", "x_meta/1.json": b"{}"}
    archive = read_charx(write_charx(CARD, files))
    assert archive.card_json == CARD
    assert archive.files == files


def test_written_archive_is_reproducible_and_card_first() -> None:
    one = write_charx(CARD, {"a.bin": b"1"})
    assert one == write_charx(CARD, {"a.bin": b"1"})
    with zipfile.ZipFile(io.BytesIO(one)) as zf:
        assert zf.namelist() == ["card.json", "a.bin"]


def test_self_extracting_prefix_is_tolerated() -> None:
    data = b"MZ" + b"\x90" * 5000 + write_charx(CARD, {"assets/a.png": b"img"})
    assert is_zip(data)
    archive = read_charx(data)
    assert archive.card_json["data"]["name"] == "Zip"
    assert archive.files == {"assets/a.png": b"img"}


def test_is_zip() -> None:
    assert is_zip(write_charx(CARD, {}))
    assert not is_zip(b"{}")
    assert not is_zip(b"\x89PNG\r\n\x1a\n")


@pytest.mark.parametrize(
    ("members", "field"),
    [
        ({"other.json": b"{}"}, "card.json"),
        ({"card.json": b"{not json"}, "card.json"),
        ({"card.json": b"[1, 2]"}, "card.json"),
        ({"card.json": b'{"data": {}}'}, "spec"),
        ({"card.json": b"\xff\xfe{}"}, "card.json"),
    ],
)
def test_bad_card_json(members: dict[str, bytes], field: str) -> None:
    with pytest.raises(FormatError) as info:
        read_charx(_zip(members), source="c.charx")
    assert info.value.field == field
    assert info.value.source == "c.charx"


@pytest.mark.parametrize(
    "name", ["../evil.txt", "/etc/passwd", "C:/win.ini", "a/../../b", "..\\x", "a//b", "./a"]
)
def test_path_traversal_is_refused(name: str) -> None:
    with pytest.raises(FormatError, match="traversal") as info:
        read_charx(_zip({"card.json": _card_bytes(), name: b"x"}), source="t.charx")
    assert info.value.field == f"member {name!r}"


def test_safe_member_name_normalises_backslashes() -> None:
    assert safe_member_name("assets\\icon\\main.png") == "assets/icon/main.png"


def test_duplicate_members_are_refused() -> None:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr("card.json", _card_bytes())
            zf.writestr("card.json", _card_bytes())
    with pytest.raises(FormatError, match="duplicate"):
        read_charx(buf.getvalue())


def test_declared_size_bomb() -> None:
    data = _zip({"card.json": _card_bytes(), "big.bin": b"\0" * 200_000})
    with pytest.raises(LimitExceeded, match="unpacks"):
        read_charx(data, limits=FormatLimits(archive_unpacked_bytes=100_000))


def test_member_count_limit() -> None:
    data = _zip({"card.json": _card_bytes(), **{f"f{i}": b"" for i in range(20)}})
    with pytest.raises(LimitExceeded, match="members"):
        read_charx(data, limits=FormatLimits(archive_members=10))


def test_card_json_size_limit() -> None:
    big = {**CARD, "data": {"name": "x" * 5000}}
    with pytest.raises(LimitExceeded) as info:
        read_charx(_zip({"card.json": _card_bytes(big)}), limits=FormatLimits(card_json_bytes=1000))
    assert info.value.field == "member 'card.json'"


def _lie_about_size(data: bytes, name: bytes, size: int) -> bytes:
    """Rewrite the uncompressed size of ``name`` in both the local and central headers."""
    out = bytearray(data)
    local = out.find(b"PK\x03\x04")
    while local != -1:
        name_len = struct.unpack("<H", out[local + 26 : local + 28])[0]
        if out[local + 30 : local + 30 + name_len] == name:
            out[local + 22 : local + 26] = struct.pack("<I", size)
        local = out.find(b"PK\x03\x04", local + 4)
    central = out.find(b"PK\x01\x02")
    while central != -1:
        name_len = struct.unpack("<H", out[central + 28 : central + 30])[0]
        if out[central + 46 : central + 46 + name_len] == name:
            out[central + 24 : central + 28] = struct.pack("<I", size)
        central = out.find(b"PK\x01\x02", central + 4)
    return bytes(out)


def test_headers_that_lie_about_size_do_not_inflate_past_it() -> None:
    honest = _zip({"card.json": _card_bytes(), "bomb.bin": b"\0" * 1_000_000})
    lying = _lie_about_size(honest, b"bomb.bin", 100)
    # The declared total passes the limit, the real one would not.
    with pytest.raises(FormatError):
        read_charx(lying, limits=FormatLimits(archive_unpacked_bytes=10_000))


def test_truncated_archive() -> None:
    data = write_charx(CARD, {"a.bin": b"x" * 1000})
    with pytest.raises(FormatError) as info:
        read_charx(data[: len(data) // 2], source="cut.charx")
    assert info.value.source == "cut.charx"


def test_corrupt_member_crc() -> None:
    data = bytearray(_zip({"card.json": _card_bytes(), "a.bin": b"abcdef"}, method=0))
    pos = data.find(b"abcdef")
    data[pos] = ord("X")
    with pytest.raises(FormatError, match="zip"):
        read_charx(bytes(data))


def test_unsupported_compression() -> None:
    data = _zip({"card.json": _card_bytes()}, method=zipfile.ZIP_BZIP2)
    patched = bytearray(data)
    # Mark the member as compressed with method 99 (AE-x encryption) in both headers.
    patched[8:10] = struct.pack("<H", 99)
    central = patched.find(b"PK\x01\x02")
    patched[central + 10 : central + 12] = struct.pack("<H", 99)
    with pytest.raises(FormatError):
        read_charx(bytes(patched))


def test_embedded_path() -> None:
    assert embedded_path("embeded://assets/a.png") == "assets/a.png"
    assert embedded_path("embedded://assets/a.png") == "assets/a.png"
    assert embedded_path("__asset:assets/a.png") == "assets/a.png"
    assert embedded_path("ccdefault:") is None
    assert embedded_path("https://example.invalid/a.png") is None


def test_asset_member_path_layout() -> None:
    assert asset_member_path("icon", "main", "png") == "assets/icon/images/main.png"
    assert asset_member_path("emotion", "joy", "ogg") == "assets/emotion/audio/joy.ogg"
    assert asset_member_path("x", "../../evil", "") == "assets/x/other/evil.bin"


def test_writer_refuses_unsafe_or_reserved_names() -> None:
    with pytest.raises(FormatError):
        write_charx(CARD, {"../x": b""})
    with pytest.raises(FormatError):
        write_charx(CARD, {"card.json": b""})


_segment = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-.", min_size=1, max_size=8)
_member = (
    st.lists(_segment, min_size=1, max_size=3)
    .map("/".join)
    .filter(lambda p: p != "card.json" and not any(s in (".", "..") for s in p.split("/")))
)


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(_member, st.binary(max_size=300), max_size=6))
def test_round_trip_property(files: dict[str, bytes]) -> None:
    archive = read_charx(write_charx(CARD, files))
    assert archive.files == files
    assert archive.card_json == CARD
