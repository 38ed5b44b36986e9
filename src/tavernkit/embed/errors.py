"""The embedder's typed errors."""

from __future__ import annotations

from tavernkit.errors import TavernKitError

__all__ = ["EmbedderUnavailable", "EmbeddingInputError"]


class EmbedderUnavailable(TavernKitError):
    """The embedder cannot run here: a package of the ``embed`` extra or one of its files is
    missing or not the expected file. The message says which, and how to fix it."""


class EmbeddingInputError(TavernKitError, TypeError):
    """A text to embed is not a string; ``index`` is its position in the batch."""

    def __init__(self, message: str, *, index: int) -> None:
        super().__init__(message)
        self.index = index
