"""Named vector collections (one per chat, one per lorebook), synchronized by text hash.

A collection holds items ``(hash, text, label)``: the hash is the text's identity (cyrb53 of
the text, SillyTavern's ``getStringHash``), several items may share one (the chunks of a
message), ``label`` is the chat index or the entry uid. :meth:`VectorCollections.sync` makes a
collection hold exactly the given hashes: it embeds only the hashes it lacks and deletes the
ones no longer given, so an unchanged text is never re-embedded (a changed text has a new
hash). With ``rows`` (the store's :class:`~tavernkit.store.vectors.VectorRows`), items persist
across processes, per embedder name; without, they live as long as the object.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from tavernkit.memory.embedding import TextEmbedder
from tavernkit.memory.index import Hit, VectorIndex

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["Item", "VectorCollections", "VectorRows"]

#: ``(hash, text, label)``
Item = tuple[int, str, int]


@runtime_checkable
class VectorRows(Protocol):
    """Persistent rows of collections (implemented by the SQLite store)."""

    async def load_vectors(
        self, collection: str, space: str, *, owner: str
    ) -> tuple[list[Item], NDArray[np.float32] | None]: ...

    async def add_vectors(
        self,
        collection: str,
        space: str,
        items: Sequence[Item],
        vectors: NDArray[np.float32],
        *,
        owner: str,
    ) -> None: ...

    async def delete_vectors(
        self, collection: str, space: str, hashes: Sequence[int], *, owner: str
    ) -> None: ...


class VectorCollections:
    """Collections in one vector space (one embedder). Not safe for concurrent use of one
    collection from two tasks; one chat turn uses it at a time."""

    def __init__(
        self,
        embedder: TextEmbedder,
        *,
        rows: VectorRows | None = None,
        owner: str = "default",
        query_cache: int = 32,
    ) -> None:
        self.embedder = embedder
        self.rows = rows
        self.owner = owner
        self._indexes: dict[str, VectorIndex] = {}
        self._queries: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self._query_cache = query_cache
        #: texts embedded so far (documents and queries), for tests and benchmarks
        self.embedded = 0

    @property
    def space(self) -> str:
        return self.embedder.name

    async def _index(self, collection: str) -> VectorIndex | None:
        index = self._indexes.get(collection)
        if index is None and self.rows is not None:
            items, vectors = await self.rows.load_vectors(collection, self.space, owner=self.owner)
            if vectors is not None and items:
                index = VectorIndex(int(vectors.shape[1]))
                index.add(items, vectors)
                self._indexes[collection] = index
        return index

    async def hashes(self, collection: str) -> set[int]:
        """The hashes a collection holds (SillyTavern's ``/api/vector/list``)."""
        index = await self._index(collection)
        return set(index.hashes) if index is not None else set()

    async def sync(self, collection: str, items: Iterable[Item]) -> tuple[int, int]:
        """Make ``collection`` hold exactly the hashes of ``items``; returns (added items,
        deleted hashes). Items of a hash the collection already has are not embedded."""
        wanted = list(items)
        have = await self.hashes(collection)
        wanted_hashes = {h for h, _, _ in wanted}
        new = [item for item in wanted if item[0] not in have]
        stale = sorted(have - wanted_hashes)
        if new:
            await self.add(collection, new)
        if stale:
            await self.delete(collection, stale)
        return len(new), len(stale)

    async def add(self, collection: str, items: Sequence[Item]) -> None:
        """Embed ``items`` (one batch) and append them."""
        if not items:
            return
        vectors = await self.embedder.embed_many([text for _, text, _ in items])
        self.embedded += len(items)
        index = await self._index(collection)
        if index is None:
            index = VectorIndex(int(vectors.shape[1]))
            self._indexes[collection] = index
        index.add(items, vectors)
        if self.rows is not None:
            await self.rows.add_vectors(collection, self.space, items, vectors, owner=self.owner)

    async def delete(self, collection: str, hashes: Sequence[int]) -> None:
        index = await self._index(collection)
        if index is not None:
            index.remove(hashes)
        if self.rows is not None:
            await self.rows.delete_vectors(collection, self.space, hashes, owner=self.owner)

    async def query_vector(self, text: str) -> NDArray[np.float32]:
        """The embedding of a query text (the last few are remembered: the chat and the
        world-info queries of one turn are usually the same text)."""
        vector = self._queries.get(text)
        if vector is None:
            vector = (await self.embedder.embed_many([text]))[0]
            self.embedded += 1
            self._queries[text] = vector
            if len(self._queries) > self._query_cache:
                self._queries.popitem(last=False)
        else:
            self._queries.move_to_end(text)
        return vector

    async def query(self, collection: str, text: str, top_k: int) -> list[Hit]:
        """The ``top_k`` best items of one collection, best first."""
        index = await self._index(collection)
        if index is None or not len(index):
            return []
        return index.query(await self.query_vector(text), top_k)

    async def query_multi(
        self, collections: Sequence[str], text: str, top_k: int, threshold: float
    ) -> list[Hit]:
        """``/api/vector/query-multi``: ``top_k`` of each collection, merged by score (stable),
        those scoring at least ``threshold``, then ``top_k`` overall."""
        merged: list[Hit] = []
        for collection in collections:
            merged.extend(await self.query(collection, text, top_k))
        merged.sort(key=lambda hit: -hit.score)
        return [hit for hit in merged if hit.score >= threshold][:top_k]
