"""tavernkit.embed: offline sentence embeddings for the features that retrieve by meaning
(vectorized lorebook entries, chat memory).

:class:`Embedder` is the protocol (a batch API: many texts in, one L2-normalized row each
out, so a dot product is the cosine similarity); :class:`MiniLMEmbedder` implements it with
all-MiniLM-L6-v2 as int8 ONNX on onnxruntime, from wheels installed by the ``embed`` extra
(nothing is downloaded at run time). Without the extra, using the embedder raises
:class:`EmbedderUnavailable` naming it; importing this package never needs it.
"""

from __future__ import annotations

from tavernkit.embed.errors import EmbedderUnavailable, EmbeddingInputError
from tavernkit.embed.minilm import MiniLMEmbedder, embed_async
from tavernkit.embed.protocol import Embedder

__all__ = [
    "Embedder",
    "EmbedderUnavailable",
    "EmbeddingInputError",
    "MiniLMEmbedder",
    "embed_async",
]
