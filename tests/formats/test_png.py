"""PNG chunk reading and rewriting: text chunks in, image bytes untouched, bad files refused."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from tavernkit.errors import FormatError, LimitExceeded
from tavernkit.formats.file_io import FormatLimits
from tavernkit.formats.png import (
    PNG_SIGNATURE,
    decode_base64_text,
    make_chunk,
    parse_chunks,
    placeholder_png,
    read_text_chunks,
    replace_text_chunks,
)


def _png_with(*extra: bytes, trailer: bytes = b"") -> bytes:
    """The placeholder image with ``extra`` chunks inserted after IHDR."""
    base = parse_chunks(placeholder_png(4, 4))
    ihdr, rest = base.chunks[0].raw, b"".join(c.raw for c in base.chunks[1:])
    return PNG_SIGNATURE + ihdr + b"".join(extra) + rest + trailer


def _text(keyword: str, text: str) -> bytes:
    return make_chunk(b"tEXt", keyword.encode("latin-1") + b"\x00" + text.encode("latin-1"))


def test_placeholder_is_a_valid_image() -> None:
    png = placeholder_png()
    with Image.open(io.BytesIO(png)) as image:
        image.load()
        assert image.size == (100, 150)
        assert image.mode == "RGB"
    assert [c.type for c in parse_chunks(png).chunks] == [b"IHDR", b"IDAT", b"IEND"]


def test_read_all_text_chunk_kinds() -> None:
    ztxt = make_chunk(b"zTXt", b"Comment\x00\x00" + zlib.compress(b"squeezed"))
    itxt_plain = make_chunk(b"iTXt", b"Title\x00\x00\x00en\x00Titel\x00" + "näive ✓".encode())
    itxt_z = make_chunk(b"iTXt", b"Desc\x00\x01\x00\x00\x00" + zlib.compress("ü".encode()))
    png = _png_with(_text("Author", "me"), ztxt, itxt_plain, itxt_z)
    chunks = read_text_chunks(png)
    assert [(c.keyword, c.text, c.chunk_type) for c in chunks] == [
        ("Author", "me", "tEXt"),
        ("Comment", "squeezed", "zTXt"),
        ("Title", "näive ✓", "iTXt"),
        ("Desc", "ü", "iTXt"),
    ]


def test_keywords_filter_is_case_insensitive() -> None:
    png = _png_with(_text("CHARA", "x"), _text("other", "y"), _text("CcV3", "z"))
    assert [c.text for c in read_text_chunks(png, keywords=["chara", "ccv3"])] == ["x", "z"]


def test_replace_inserts_before_iend_and_keeps_other_bytes() -> None:
    other = _text("Software", "paint")
    png = _png_with(_text("chara", "old"), other, _text("CCV3", "old3"), trailer=b"TRAILING")
    out = replace_text_chunks(png, [("chara", "new2"), ("ccv3", "new3")], remove=["chara", "ccv3"])
    parsed = parse_chunks(out)
    assert [c.type for c in parsed.chunks] == [b"IHDR", b"tEXt", b"IDAT", b"tEXt", b"tEXt", b"IEND"]
    assert parsed.chunks[1].raw == other
    assert [(c.keyword, c.text) for c in read_text_chunks(out)][1:] == [
        ("chara", "new2"),
        ("ccv3", "new3"),
    ]
    assert parsed.trailer == b"TRAILING"
    original = parse_chunks(png)
    assert parsed.chunks[0].raw == original.chunks[0].raw  # IHDR
    assert parsed.chunks[2].raw == original.chunks[4].raw  # IDAT


def test_replace_removes_compressed_card_chunks_too() -> None:
    itxt = make_chunk(b"iTXt", b"chara\x00\x00\x00\x00\x00old")
    ztxt = make_chunk(b"zTXt", b"ccv3\x00\x00" + zlib.compress(b"old"))
    out = replace_text_chunks(_png_with(itxt, ztxt), [], remove=["chara", "ccv3"])
    assert read_text_chunks(out) == []


def test_bad_crc_on_other_chunk_is_copied_not_checked() -> None:
    bad = bytearray(make_chunk(b"tIME", b"\x07\xe8\x01\x01\x00\x00\x00"))
    bad[-1] ^= 0xFF
    png = _png_with(bytes(bad))
    out = replace_text_chunks(png, [("chara", "x")], remove=["chara"])
    assert bytes(bad) in out


def test_bad_crc_on_text_chunk_is_an_error() -> None:
    bad = bytearray(_text("chara", "data"))
    bad[-1] ^= 0xFF
    with pytest.raises(FormatError, match="CRC") as info:
        read_text_chunks(_png_with(bytes(bad)), keywords=["chara"], source="card.png")
    assert info.value.field == "tEXt 'chara'"
    assert info.value.source == "card.png"


def test_non_latin1_text_chunk_write_is_refused() -> None:
    with pytest.raises(FormatError):
        replace_text_chunks(placeholder_png(2, 2), [("chara", "ü✓")])


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"GIF89a....", "signature"),
        (PNG_SIGNATURE, "no IEND"),
        (PNG_SIGNATURE + b"\x00\x00", "truncated"),
        (PNG_SIGNATURE + make_chunk(b"IEND", b""), "IHDR"),
        (PNG_SIGNATURE + b"\x00\x00\x00\x05IH!R" + b"x" * 9, "chunk type"),
    ],
)
def test_malformed_files(data: bytes, match: str) -> None:
    with pytest.raises(FormatError, match=match) as info:
        parse_chunks(data, source="bad.png")
    assert info.value.source == "bad.png"
    assert info.value.field


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_truncation_is_a_format_error(data: st.DataObject) -> None:
    png = _png_with(_text("chara", "abc"))
    cut = data.draw(st.integers(min_value=0, max_value=len(png) - 1))
    with pytest.raises(FormatError) as info:
        read_text_chunks(png[:cut], source="cut.png")
    assert info.value.source == "cut.png"


def test_missing_iend_names_the_problem() -> None:
    png = placeholder_png(2, 2)
    without_iend = png[: -len(make_chunk(b"IEND", b""))]
    with pytest.raises(FormatError, match="no IEND"):
        parse_chunks(without_iend)


def test_image_size_limit() -> None:
    png = placeholder_png(8, 8)
    with pytest.raises(LimitExceeded):
        parse_chunks(png, limits=FormatLimits(image_bytes=len(png) - 1))


def test_compressed_text_bomb_is_limited() -> None:
    bomb = make_chunk(b"zTXt", b"chara\x00\x00" + zlib.compress(b"A" * 1_000_000))
    limits = FormatLimits(card_json_bytes=1000)
    with pytest.raises(LimitExceeded) as info:
        read_text_chunks(_png_with(bomb), keywords=["chara"], limits=limits)
    assert info.value.field == "zTXt 'chara'"


def test_invalid_utf8_in_itxt() -> None:
    chunk = make_chunk(b"iTXt", b"chara\x00\x00\x00\x00\x00\xff\xfe")
    with pytest.raises(FormatError, match="UTF-8") as info:
        read_text_chunks(_png_with(chunk))
    assert info.value.field == "iTXt 'chara'"


def test_chunk_without_keyword() -> None:
    with pytest.raises(FormatError, match="keyword"):
        read_text_chunks(_png_with(make_chunk(b"tEXt", b"no separator")))


def test_base64_tolerates_whitespace_and_padding() -> None:
    assert decode_base64_text("aGVs\nbG8") == b"hello"
    assert decode_base64_text(" aGVsbG8= ") == b"hello"


@pytest.mark.parametrize("bad", ["ab$d", "a", "!!!!"])
def test_base64_invalid(bad: str) -> None:
    with pytest.raises(FormatError, match="base64") as info:
        decode_base64_text(bad, source="c.png", field="tEXt 'chara'")
    assert info.value.field == "tEXt 'chara'"


def test_base64_limit_checked_before_decoding() -> None:
    with pytest.raises(LimitExceeded):
        decode_base64_text("QUFB" * 100, limit=10)


_keyword = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=20
)
_latin1 = st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=0xFF), max_size=200)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(_keyword, _latin1), max_size=5))
def test_text_chunks_round_trip(chunks: list[tuple[str, str]]) -> None:
    base = placeholder_png(3, 3)
    out = replace_text_chunks(base, chunks)
    assert [(c.keyword, c.text) for c in read_text_chunks(out)] == chunks
    before, after = parse_chunks(base), parse_chunks(out)
    image_chunks = [c.raw for c in after.chunks if c.type != b"tEXt"]
    assert image_chunks == [c.raw for c in before.chunks]


def test_chunk_length_field_matches_struct() -> None:
    chunk = make_chunk(b"tEXt", b"a\x00b")
    assert struct.unpack(">I", chunk[:4])[0] == 3
    assert zlib.crc32(b"tEXta\x00b") == struct.unpack(">I", chunk[-4:])[0]
