"""Decompression bombs (issue 34, finding 4): CHARX members and PNG text chunks are capped per
entry, per file and by how much they grow, each refused with a LimitExceeded naming the
numbers, and the readers stop at the cap (memory stays near it, never near the bomb)."""

from __future__ import annotations

import base64
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from _hostile import MiB, lying_charx, png, zeros_charx, ztxt_bomb_png
from tavernkit.errors import FormatError, LimitExceeded
from tavernkit.formats.cards import read_card
from tavernkit.formats.file_io import FormatLimits
from tavernkit.formats.png import make_chunk, read_text_chunks


def _peak(read: Callable[[], Any]) -> tuple[BaseException, int]:
    """What ``read`` raised, and the most memory it held at once."""
    tracemalloc.start()
    try:
        read()
    except FormatError as exc:
        raised: BaseException = exc
    else:
        raise AssertionError("the hostile file was read")
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return raised, peak


def test_the_issues_charx_of_190_mib_of_zeros_is_refused_unread() -> None:
    bomb = zeros_charx(190 * MiB)
    assert len(bomb) < 200 * 1024  # 189 KiB, as in the issue
    raised, peak = _peak(lambda: read_card(bomb))
    assert isinstance(raised, LimitExceeded)
    assert "unpacks to 199229644 bytes, over the limit of 104857600" in str(raised)
    assert peak < 4 * MiB


def test_a_member_under_the_cap_that_grows_a_thousandfold_is_refused() -> None:
    bomb = zeros_charx(20 * MiB)
    raised, peak = _peak(lambda: read_card(bomb))
    assert isinstance(raised, LimitExceeded)
    assert "20971520 bytes" in str(raised) and "100 times" in str(raised)
    assert peak < 4 * MiB


def test_a_member_inflating_past_its_declared_size_stops_there() -> None:
    bomb = lying_charx(1000, 50 * MiB)
    raised, peak = _peak(lambda: read_card(bomb))
    assert isinstance(raised, FormatError)
    assert peak < 4 * MiB


def test_the_archive_is_capped_as_a_whole() -> None:
    limits = FormatLimits(archive_unpacked_bytes=10 * MiB)
    raised, _ = _peak(lambda: read_card(zeros_charx(11 * MiB), limits=limits))
    assert isinstance(raised, LimitExceeded)


def test_a_ztxt_chunk_of_256_mib_stops_at_a_hundred_times_its_size() -> None:
    bomb = ztxt_bomb_png(256 * MiB)
    raised, peak = _peak(lambda: read_card(bomb))
    assert isinstance(raised, LimitExceeded)
    assert "100 times" in str(raised)
    # the inflater stopped at 100x the chunk's 260 KiB, not at the card limit or the bomb
    assert peak < 30 * MiB


def test_the_text_chunks_of_one_png_are_capped_together() -> None:
    limits = FormatLimits(card_json_bytes=MiB)
    text = base64.b64encode(bytes(range(256)) * (3 * 1024)).decode()  # 1 MiB of base64
    chunks = [make_chunk(b"tEXt", b"chara\x00" + text.encode()) for _ in range(4)]
    bomb = png(8, 8, None, *chunks)
    with pytest.raises(LimitExceeded, match="together"):
        read_text_chunks(bomb, keywords=["chara"], limits=limits)
    # two copies of a card (V2 and V3) fit
    assert len(read_text_chunks(png(8, 8, None, *chunks[:2]), limits=limits)) == 2
