"""An in-memory vector collection searched by brute force with numpy.

Why brute force: ``sqlite-vec`` cannot load in this Python (its ``sqlite3`` has no
``enable_load_extension``), and an exact scan of 100,000 384-dimensional float32 rows is one
matrix-vector product (about 40 MB read, a few milliseconds on one core; see
``benchmarks/memory.py``), so recall is exactly 1 and no index has to be kept in step with
edits. Rows are stored L2-normalized, so the dot product is SillyTavern's cosine score
(vectra's ``normalizedCosineSimilarity``); ties keep insertion order as vectra's stable sort
does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tavernkit.errors import EmbeddingError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["Hit", "VectorIndex"]


@dataclass(frozen=True, slots=True)
class Hit:
    """One item of a query's answer: its hash (the text's identity), text, label, score."""

    hash: int
    text: str
    label: int
    score: float


class VectorIndex:
    """Items ``(hash, text, label, vector)`` in insertion order; several items may share a
    hash (the chunks of one message)."""

    def __init__(self, dimension: int) -> None:
        import numpy as np  # optional (the 'embed' extra): the core installs and runs without it

        self.dimension = dimension
        self._rows: NDArray[np.float32] = np.zeros((0, dimension), dtype=np.float32)
        self._pending: list[NDArray[np.float32]] = []
        self.hashes: list[int] = []
        self.texts: list[str] = []
        self.labels: list[int] = []

    def __len__(self) -> int:
        return len(self.hashes)

    def add(
        self,
        items: Sequence[tuple[int, str, int]],
        vectors: NDArray[np.float32],
    ) -> None:
        """Append ``items`` with their ``vectors`` (one row each, normalized here)."""
        import numpy as np  # optional (the 'embed' extra): the core installs and runs without it

        rows = np.asarray(vectors, dtype=np.float32)
        if rows.ndim != 2 or rows.shape != (len(items), self.dimension):
            raise EmbeddingError(
                f"expected {len(items)} vectors of {self.dimension} dimensions, "
                f"got shape {tuple(rows.shape)}"
            )
        if not items:
            return
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        self._pending.append(rows / np.clip(norms, 1e-12, None))
        for item_hash, text, label in items:
            self.hashes.append(int(item_hash))
            self.texts.append(text)
            self.labels.append(int(label))

    def remove(self, hashes: Iterable[int]) -> None:
        """Delete every item whose hash is in ``hashes``."""
        import numpy as np  # optional (the 'embed' extra): the core installs and runs without it

        gone = set(hashes)
        if not gone:
            return
        keep = [i for i, h in enumerate(self.hashes) if h not in gone]
        self._rows = self._matrix()[np.array(keep, dtype=np.int64)] if keep else self._rows[:0]
        self.hashes = [self.hashes[i] for i in keep]
        self.texts = [self.texts[i] for i in keep]
        self.labels = [self.labels[i] for i in keep]

    def _matrix(self) -> NDArray[np.float32]:
        import numpy as np  # optional (the 'embed' extra): the core installs and runs without it

        if self._pending:
            self._rows = np.concatenate([self._rows, *self._pending])
            self._pending = []
        return self._rows

    def scores(self, query: NDArray[np.float32]) -> NDArray[np.float32]:
        """The cosine score of every item for ``query`` (one vector)."""
        import numpy as np  # optional (the 'embed' extra): the core installs and runs without it

        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dimension:
            raise EmbeddingError(
                f"query vector has {q.shape[0]} dimensions, the collection {self.dimension}"
            )
        norm = float(np.linalg.norm(q))
        if norm > 0:
            q = (q / norm).astype(np.float32)
        result: NDArray[np.float32] = self._matrix() @ q
        return result

    def query(self, query: NDArray[np.float32], top_k: int) -> list[Hit]:
        """The ``top_k`` best items, best first (equal scores in insertion order)."""
        import numpy as np  # optional (the 'embed' extra): the core installs and runs without it

        if top_k <= 0 or not self.hashes:
            return []
        scores = self.scores(query)
        k = min(top_k, len(scores))
        if k < len(scores):
            # the k best (and every item tied with the k-th) by a partial sort, then ordered
            kth = np.partition(-scores, k - 1)[k - 1]
            candidates = np.nonzero(-scores <= kth)[0]
        else:
            candidates = np.arange(len(scores))
        order = candidates[np.lexsort((candidates, -scores[candidates]))][:k]
        return [
            Hit(self.hashes[i], self.texts[i], self.labels[i], float(scores[i]))
            for i in order.tolist()
        ]
