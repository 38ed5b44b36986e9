"""Token counting: the ``Tokenizer`` protocol and the counters SillyTavern's budgets use.

SillyTavern trims prompts by token counts, so a prompt equal to its own depends on counting the
way it does: OpenAI-family chat models count with tiktoken (o200k for the gpt-4o family, cl100k
for the rest), and a text-completion setup with no tokenizer selected falls back to a byte
estimate, ``ceil(utf8_bytes / 3.35)``. quicktok gives the same ids as tiktoken offline and is
much faster; the vocabularies load lazily because loading one takes a fraction of a second.

Counts are cached per text: a prompt build counts the same chat messages on every turn, and the
cache is what makes a warm rebuild cheap (SillyTavern keeps a similar cache per chat).
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import cache
from typing import Any, Protocol, runtime_checkable

import quicktok  # type: ignore[import-untyped]

__all__ = [
    "ByteEstimateTokenizer",
    "CachedTokenizer",
    "QuicktokTokenizer",
    "Tokenizer",
    "byte_estimate",
    "encoding_for_model",
    "tokenizer_for_model",
]

#: SillyTavern's guess of the average UTF-8 bytes per token when no tokenizer is selected.
BYTES_PER_TOKEN = 3.35


@runtime_checkable
class Tokenizer(Protocol):
    """Anything that counts the tokens of a text."""

    def count(self, text: str) -> int: ...


def byte_estimate(text: str) -> int:
    """SillyTavern's ``guesstimate``: ``ceil(utf8 bytes / 3.35)``."""
    return math.ceil(len(text.encode("utf-8", "surrogatepass")) / BYTES_PER_TOKEN)


class ByteEstimateTokenizer:
    """The tokenizer of "None" (SillyTavern's text-completion default): a byte estimate."""

    name = "bytes/3.35"

    def count(self, text: str) -> int:
        return byte_estimate(text)


@cache
def _load_encoding(name: str) -> Any:
    # the vocabulary loads here, on first use (~0.4 s for o200k); importing quicktok is cheap
    return quicktok.get_encoding(name)


class QuicktokTokenizer:
    """An exact tiktoken-compatible BPE count (``o200k_base``, ``cl100k_base``...).

    Special-token text counts as ordinary text (a user can type ``<|endoftext|>``), and lone
    surrogates, which quicktok refuses, are counted as the replacement character tiktoken
    would have produced.
    """

    def __init__(self, encoding: str = "o200k_base") -> None:
        self.name = encoding
        self._encoding: Any = None

    def _enc(self) -> Any:
        if self._encoding is None:
            self._encoding = _load_encoding(self.name)
        return self._encoding

    def count(self, text: str) -> int:
        if not text:
            return 0
        try:
            return int(self._enc().count(text))
        except TypeError:
            cleaned = text.encode("utf-8", "replace").decode("utf-8")
            return int(self._enc().count(cleaned))


class CachedTokenizer:
    """A tokenizer with a bounded per-text cache in front (thread-safe, LRU)."""

    def __init__(self, inner: Tokenizer, *, max_entries: int = 65536) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)
        self._max = max_entries
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def count(self, text: str) -> int:
        with self._lock:
            found = self._cache.get(text)
            if found is not None:
                self._cache.move_to_end(text)
                self.hits += 1
                return found
        value = self.inner.count(text)
        with self._lock:
            self.misses += 1
            self._cache[text] = value
            if len(self._cache) > self._max:
                self._cache.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()


# SillyTavern's getTokenizerModel(): the gpt-4o/4.1/4.5/5 and o-series families use o200k; other
# OpenAI-style models (gpt-4, gpt-3.5, and anything unknown through an OpenAI-compatible source)
# use cl100k.
_O200K = re.compile(r"(^|/)(gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|chatgpt-4o|o1|o3|o4)", re.IGNORECASE)


def encoding_for_model(model: str | None) -> str:
    """The tiktoken encoding SillyTavern counts ``model`` with."""
    if model and _O200K.search(model):
        return "o200k_base"
    return "cl100k_base"


def tokenizer_for_model(
    model: str | None, *, factory: Callable[[str], Tokenizer] | None = None
) -> CachedTokenizer:
    """A new cached tokenizer for ``model``. Keep it for the session: its cache is what keeps
    rebuilds of the same chat warm (the vocabulary itself is loaded once per process)."""
    encoding = encoding_for_model(model)
    inner = factory(encoding) if factory is not None else QuicktokTokenizer(encoding)
    return CachedTokenizer(inner)
