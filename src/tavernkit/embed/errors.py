"""The embedder's typed errors."""

from __future__ import annotations

from tavernkit.errors import EmbedderUnavailable as EmbedderUnavailable
from tavernkit.errors import EmbeddingInputError as EmbeddingInputError

__all__ = ["EmbedderUnavailable", "EmbeddingInputError"]
