"""Token counting for the world-info budget.

The budget goes through an injected counter. SillyTavern's own estimate when no tokenizer is
set, ``ceil(UTF-8 bytes / 3.35)``, is :data:`estimate_tokens`; because it is a function of the
byte length alone, the scan updates it incrementally instead of re-counting the growing text
once per activated entry (SillyTavern's O(n²) hot spot). Any other counter is called on the
exact text SillyTavern would count, so results stay identical for non-additive tokenizers.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["ByteEstimate", "TokenCounter", "estimate_tokens"]

TokenCounter = Callable[[str], int]


class ByteEstimate:
    """``ceil(utf8_bytes / ratio)`` (SillyTavern's ``guesstimate``; 0 for empty text)."""

    __slots__ = ("ratio",)

    def __init__(self, ratio: float = 3.35) -> None:
        self.ratio = ratio

    def __call__(self, text: str) -> int:
        if not text:
            return 0
        return self.from_bytes(len(text.encode("utf-8", "surrogatepass")))

    def count(self, text: str) -> int:
        """The estimate as a token counter gives it (the turn's fitter counts with it)."""
        return self(text)

    def from_bytes(self, n_bytes: int) -> int:
        return math.ceil(n_bytes / self.ratio) if n_bytes else 0

    def __repr__(self) -> str:
        return f"ByteEstimate({self.ratio})"


estimate_tokens = ByteEstimate()


def chat_message_counter(count: TokenCounter, role_tokens: int = 1) -> TokenCounter:
    """The world-info budget counter SillyTavern uses under Chat Completion with an OpenAI
    tokenizer: ``countTokensOpenAIAsync({role: 'system', content}, full=true)``, i.e. the
    content's tokens + 3 per message + the role's tokens + 3 request padding - 1; empty text
    counts 0. ``count`` is the plain counter (e.g. quicktok's o200k ``count`` for gpt-4o)."""

    def counter(text: str) -> int:
        return count(text) + 5 + role_tokens if text else 0

    return counter
