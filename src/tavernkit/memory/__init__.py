"""tavernkit.memory: SillyTavern's Vector Storage and Summarize extensions.

Which module does what:

- ``turn.py``: ``apply_memory``, the one step a generation runs before its world-info scan
  (vectorized entries, chat recall, the summary injection), in SillyTavern's order;
- ``vectorized.py``: lorebook entries activated by similarity (``force_activate`` keys);
- ``chat_memory.py``: a chat's collection (``sync_chat``) and the recall into ``3_vectors``;
- ``summary.py``: the summary's gate, Raw prompt, storage place and ``1_memory`` injection
  (making one is ``tavernkit.assist.summary``);
- ``collections.py``: named collections synchronized by text hash, persisted through
  ``VectorRows`` (the SQLite store's ``memory_vectors``); ``index.py``: the numpy search;
- ``embedding.py``: the offline embedder off the event loop, an OpenAI-compatible
  ``/embeddings`` endpoint; ``spaces.py``: the runtime's collections per embedder;
- ``text.py``: SillyTavern's chunking (``splitRecursive``), query text and hashes.

Settings are ``tavernkit.models.memory`` (``Settings.memory``).
"""

from __future__ import annotations

from tavernkit.memory.collections import VectorCollections, VectorRows
from tavernkit.memory.embedding import EndpointEmbedder, LocalEmbedder, TextEmbedder
from tavernkit.memory.index import Hit, VectorIndex
from tavernkit.memory.turn import MemoryStep, TurnMemory, apply_memory

__all__ = [
    "EndpointEmbedder",
    "Hit",
    "LocalEmbedder",
    "MemoryStep",
    "TextEmbedder",
    "TurnMemory",
    "VectorCollections",
    "VectorIndex",
    "VectorRows",
    "apply_memory",
]
