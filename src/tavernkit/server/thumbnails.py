"""Small thumbnails of character avatars for paged lists: a list of 1,000 cards then costs
1,000 small images fetched as they scroll into view, not 1,000 full cards and PNGs.

A thumbnail is made on first request (WebP, at most :data:`THUMB_SIZE` pixels a side) in a
worker thread, never on the event loop (decoding a 1536 px avatar takes tens of milliseconds
that every other request would wait for), and kept in a bounded in-process cache keyed by the
record's id and update time, so an edited avatar gets a new one and nothing is written to the
store on a read. Requests for one thumbnail that arrive while it is being made share it."""

from __future__ import annotations

import asyncio
import io
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime

from tavernkit.errors import FormatError
from tavernkit.server.avatars import IMPORT_FORMATS, open_bounded

__all__ = ["THUMB_SIZE", "Thumbnails"]

THUMB_SIZE = 128


def make_thumbnail(image: bytes) -> bytes:
    """A small WebP of ``image``; an avatar that is not an image, or one with more pixels
    than :data:`~tavernkit.server.avatars.AVATAR_MAX_PIXELS` (a decompression bomb stored
    before imports were bounded), is a :class:`FormatError` (422) naming its size, never a
    server error."""
    try:
        with open_bounded(image, IMPORT_FORMATS) as img:
            img.thumbnail((THUMB_SIZE, THUMB_SIZE))
            out = io.BytesIO()
            img.convert("RGBA").save(out, format="WEBP", quality=80)
    except FormatError as exc:
        raise FormatError(f"no thumbnail of this avatar: {exc.reason}", field="avatar") from None
    except Exception as exc:  # a header Pillow read, then data it cannot decode
        raise FormatError(
            f"no thumbnail of this avatar: it cannot be decoded ({type(exc).__name__})",
            field="avatar",
        ) from None
    return out.getvalue()


class Thumbnails:
    """``make`` turns an avatar into its thumbnail (:func:`make_thumbnail`); it runs in a
    worker thread."""

    def __init__(
        self, max_items: int = 2048, make: Callable[[bytes], bytes] = make_thumbnail
    ) -> None:
        self._max = max_items
        self._make = make
        self._cache: OrderedDict[tuple[str, datetime], bytes] = OrderedDict()
        self._making: dict[tuple[str, datetime], asyncio.Future[bytes]] = {}

    async def get(self, record_id: str, updated: datetime, image: bytes) -> bytes:
        key = (record_id, updated)
        thumb = self._cache.get(key)
        if thumb is not None:
            self._cache.move_to_end(key)
            return thumb
        making = self._making.get(key)
        if making is None:
            making = self._making[key] = asyncio.ensure_future(self._made(key, image))
        # a caller that goes away leaves the thumbnail to be made for the next one
        return await asyncio.shield(making)

    async def _made(self, key: tuple[str, datetime], image: bytes) -> bytes:
        try:
            thumb = await asyncio.to_thread(self._make, image)
        finally:
            del self._making[key]
        self._cache[key] = thumb
        if len(self._cache) > self._max:
            self._cache.popitem(last=False)
        return thumb
