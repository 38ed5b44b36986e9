"""The vector collections of one runtime, one :class:`VectorCollections` per owner and
embedder, kept for the runtime's life so a chat's vectors are read from the store once per
process and every later turn searches them in memory."""

from __future__ import annotations

from collections.abc import Callable

from tavernkit.memory.collections import VectorCollections, VectorRows
from tavernkit.memory.embedding import LocalEmbedder, TextEmbedder

__all__ = ["MemorySpaces"]


class MemorySpaces:
    """``collections(rows, owner, embedder)`` hands out the shared collections object;
    ``local()`` the one offline embedder (its model loads on first use)."""

    def __init__(self, make_local: Callable[[], TextEmbedder] | None = None) -> None:
        self._make_local = make_local or LocalEmbedder
        self._local: TextEmbedder | None = None
        self._spaces: dict[tuple[int, str, str], VectorCollections] = {}

    def local(self) -> TextEmbedder:
        if self._local is None:
            self._local = self._make_local()
        return self._local

    def set_local(self, embedder: TextEmbedder) -> None:
        """Use ``embedder`` as the offline one (an embedder already loaded, e.g. shared by
        several Taverns of one process)."""
        self._local = embedder

    def collections(
        self, rows: VectorRows | None, owner: str, embedder: TextEmbedder
    ) -> VectorCollections:
        key = (id(rows), owner, embedder.name)
        found = self._spaces.get(key)
        if found is None or found.rows is not rows:
            found = self._spaces[key] = VectorCollections(embedder, rows=rows, owner=owner)
        return found

    def forget(self, rows: VectorRows | None) -> None:
        """Drop the collections read from ``rows`` (a store that is closing)."""
        self._spaces = {k: v for k, v in self._spaces.items() if v.rows is not rows}
