"""Which characters have an avatar image, so that a list line or a chat can say so and a
browser never asks for a picture that does not exist (a JSON card has none: its thumbnail
URL would only answer 404).

An avatar found is kept in a bounded in-process cache keyed by the record's id and update
time, as the card facets and thumbnails are: the avatar is removed only with a write of the
record (its update time changes). A missing one is asked again each time, since re-importing
an unchanged card as a PNG adds its image without writing the record."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime

from tavernkit.errors import NotFound
from tavernkit.store.protocol import Store
from tavernkit.store.record_types import RecordInfo

__all__ = ["AvatarPresence"]


class AvatarPresence:
    def __init__(self, max_items: int = 100_000) -> None:
        self._max = max_items
        self._cache: OrderedDict[tuple[str, datetime], None] = OrderedDict()

    async def of(self, store: Store, infos: Sequence[RecordInfo], *, owner: str) -> set[str]:
        """The ids of those of ``infos`` (characters) that have an avatar."""
        found: set[str] = set()
        for info in infos:
            if await self.has(store, info, owner=owner):
                found.add(info.id)
        return found

    async def has(self, store: Store, info: RecordInfo, *, owner: str) -> bool:
        """Whether the character ``info`` has an avatar (``False`` once it is deleted)."""
        key = (info.id, info.updated)
        if key in self._cache:
            self._cache.move_to_end(key)
            return True
        try:
            present = "avatar" in await store.list_blobs("character", info.id, owner=owner)
        except NotFound:
            return False
        if present:
            self._cache[key] = None
            if len(self._cache) > self._max:
                self._cache.popitem(last=False)
        return present
