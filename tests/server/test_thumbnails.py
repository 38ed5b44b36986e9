"""Thumbnails are made in a worker thread, never on the event loop, once per avatar revision
(requests for one being made share it), and a bad avatar is a typed error."""

from __future__ import annotations

import asyncio
import io
import threading
from datetime import UTC, datetime

import pytest
from PIL import Image

from tavernkit.errors import FormatError
from tavernkit.server.thumbnails import THUMB_SIZE, Thumbnails, make_thumbnail


def _png(size: tuple[int, int] = (600, 900)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, "teal").save(out, format="PNG")
    return out.getvalue()


async def test_made_off_the_loop_once_and_shared() -> None:
    loop_thread = threading.get_ident()
    made_on: list[int] = []

    def make(image: bytes) -> bytes:
        made_on.append(threading.get_ident())
        return make_thumbnail(image)

    thumbs = Thumbnails(make=make)
    when = datetime(2026, 1, 1, tzinfo=UTC)
    first = await asyncio.gather(*(thumbs.get("c1", when, _png()) for _ in range(5)))
    assert len(made_on) == 1 and made_on[0] != loop_thread
    assert len({*first}) == 1
    with Image.open(io.BytesIO(first[0])) as img:
        assert img.format == "WEBP" and max(img.size) <= THUMB_SIZE
    assert await thumbs.get("c1", when, _png()) == first[0]  # cached: not made again
    assert len(made_on) == 1
    await thumbs.get("c1", datetime(2026, 1, 2, tzinfo=UTC), _png())  # a new revision
    assert len(made_on) == 2


async def test_a_bad_avatar_is_a_format_error_and_is_not_cached() -> None:
    thumbs = Thumbnails()
    when = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(FormatError):
        await thumbs.get("c1", when, b"not an image")
    assert await thumbs.get("c1", when, _png())  # the next try is made afresh
