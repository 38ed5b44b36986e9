"""Which characters have an avatar image, so that a list line or a chat can say so and a
browser never asks for a picture that does not exist (a JSON card has none: its thumbnail
URL would only answer 404).

A page of lines asks the store once (:meth:`~tavernkit.store.protocol.Store.records_with_blob`,
an indexed probe per id), never once per line: a query per card was most of a page's cost (a
page of 20 lines 5.8-8.5 ms, 0.7-1.0 ms with one query: benchmarks/library_page.py). An
avatar found is kept in a bounded in-process cache keyed by the record's id and update time,
as the card facets and thumbnails are, so a page whose characters all have one asks nothing:
the avatar is removed only with a write of the record (its update time changes). A missing
one is asked again each time, never cached, since re-importing an unchanged card as a PNG
adds its image without writing the record."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime

from tavernkit.store.protocol import Store
from tavernkit.store.record_types import RecordInfo

__all__ = ["AvatarPresence"]


class AvatarPresence:
    def __init__(self, max_items: int = 100_000) -> None:
        self._max = max_items
        self._cache: OrderedDict[tuple[str, datetime], None] = OrderedDict()

    async def of(self, store: Store, infos: Sequence[RecordInfo], *, owner: str) -> set[str]:
        """The ids of those of ``infos`` (characters) that have an avatar (none of those
        deleted meanwhile): one store query for those not known to have one."""
        found: set[str] = set()
        unknown: list[RecordInfo] = []
        for info in infos:
            key = (info.id, info.updated)
            if key in self._cache:
                self._cache.move_to_end(key)
                found.add(info.id)
            else:
                unknown.append(info)
        if not unknown:
            return found
        ids = [info.id for info in unknown]
        pictured = await store.records_with_blob("character", ids, "avatar", owner=owner)
        for info in unknown:
            if info.id in pictured:
                found.add(info.id)
                self._remember((info.id, info.updated))
        return found

    async def has(self, store: Store, info: RecordInfo, *, owner: str) -> bool:
        """Whether the character ``info`` has an avatar (``False`` once it is deleted)."""
        return info.id in await self.of(store, [info], owner=owner)

    def _remember(self, key: tuple[str, datetime]) -> None:
        self._cache[key] = None
        if len(self._cache) > self._max:
            self._cache.popitem(last=False)
