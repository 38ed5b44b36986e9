"""What every embedder offers: a name, a dimension, and a batch of texts to vectors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # numpy comes with the embed extra; the protocol itself needs nothing
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["Embedder"]


@runtime_checkable
class Embedder(Protocol):
    """A sentence embedder.

    :meth:`embed` takes a batch and returns a ``float32`` array of shape
    ``(len(texts), dimension)`` in the order of ``texts``, each row L2-normalized (so ``a @ b``
    is the cosine similarity). A text's vector does not depend on the rest of its batch.
    ``name`` identifies the vector space: vectors of different names must not be compared.
    """

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]: ...
