"""What the character list filters and sorts by that is inside the cards: the favourite flag
(SillyTavern's ``data.extensions.fav``, with the V1 top-level ``fav`` as a fallback) and the
tags (``data.tags``).

The list reads the store's listing lines (never the cards); a card's facets are read from its
JSON once and kept in a bounded in-process cache keyed by the record's id and update time, as
the thumbnails are, so an edited card is read again and an unchanged one never is. The list
needs the facets of its page only: its filters, orders and tag counts read what the store
keeps of them (migration 014, kept by triggers with the same rules as :func:`facets_of`)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tavernkit.errors import NotFound
from tavernkit.store.protocol import Store
from tavernkit.store.record_types import RecordInfo

__all__ = ["CardFacets", "Facets", "facets_of", "is_fav"]


@dataclass(frozen=True, slots=True)
class Facets:
    fav: bool
    tags: tuple[str, ...]


def is_fav(value: Any) -> bool:
    """SillyTavern writes ``fav`` as a boolean, older cards as the string ``"true"``."""
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def facets_of(card: Mapping[str, Any]) -> Facets:
    """The facets of a card's JSON (as stored: an envelope with ``data``)."""
    data = card.get("data")
    data = data if isinstance(data, Mapping) else {}
    ext = data.get("extensions")
    ext = ext if isinstance(ext, Mapping) else {}
    fav = is_fav(ext["fav"]) if "fav" in ext else is_fav(card.get("fav"))
    raw = data.get("tags")
    if not isinstance(raw, list):
        top = card.get("tags")
        raw = top if isinstance(top, list) else []
    tags: dict[str, None] = {}
    for tag in raw:
        if isinstance(tag, str) and tag.strip():
            tags.setdefault(tag.strip(), None)
    return Facets(fav=fav, tags=tuple(tags))


class CardFacets:
    def __init__(self, max_items: int = 100_000) -> None:
        self._max = max_items
        self._cache: OrderedDict[tuple[str, datetime], Facets] = OrderedDict()

    def remember(self, info: RecordInfo, card: Mapping[str, Any]) -> Facets:
        """Cache the facets of ``card`` (just read or written as ``info``)."""
        found = facets_of(card)
        self._put((info.id, info.updated), found)
        return found

    def _put(self, key: tuple[str, datetime], value: Facets) -> None:
        self._cache[key] = value
        if len(self._cache) > self._max:
            self._cache.popitem(last=False)

    async def of(
        self, store: Store, infos: Sequence[RecordInfo], *, owner: str
    ) -> dict[str, Facets]:
        """Record id -> facets of each of ``infos`` (the cards not cached are read; one
        deleted meanwhile is left out)."""
        out: dict[str, Facets] = {}
        for info in infos:
            key = (info.id, info.updated)
            found = self._cache.get(key)
            if found is None:
                try:
                    stored = await store.get_record("character", info.id, owner=owner)
                except NotFound:
                    continue
                found = facets_of(stored.data)
                self._put((stored.info.id, stored.info.updated), found)
            else:
                self._cache.move_to_end(key)
            out[info.id] = found
        return out
