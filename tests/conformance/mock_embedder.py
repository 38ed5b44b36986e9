"""The recorder's deterministic mock embedding (conformance README §6), as an embedder.

Words are the ASCII runs ``[a-z0-9]+`` of the lower-cased text; each adds 1 to bucket
``fnv1a32(word) % 64``; the vector is L2-normalized (no words: ``e_0``). Every call is
recorded, so a test can compare what was embedded with SillyTavern's embedding requests.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

_WORD = re.compile(r"[a-z0-9]+")
DIMENSION = 64


def fnv1a32(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h ^= byte
        h = (h * 0x01000193) % 2**32
    return h


def mock_vector(text: str) -> np.ndarray[Any, np.dtype[np.float32]]:
    v = np.zeros(DIMENSION, dtype=np.float64)
    for word in _WORD.findall(text.lower()):
        v[fnv1a32(word.encode("utf-8")) % DIMENSION] += 1
    norm = float(np.sqrt((v**2).sum()))
    if norm == 0:
        v[0] = 1.0
        norm = 1.0
    return (v / norm).astype(np.float32)


class MockEmbedder:
    """``memory.embedding.TextEmbedder`` over :func:`mock_vector`; ``calls`` lists each
    batch of texts in arrival order."""

    name = "mock:oracle-embed"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def embed_many(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        self.calls.append(list(texts))
        return np.stack([mock_vector(t) for t in texts]) if texts else np.zeros((0, DIMENSION))
