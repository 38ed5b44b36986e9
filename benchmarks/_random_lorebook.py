"""A random SillyTavern world-info file for the benchmarks that time a chat on a big lorebook
(``new_chat.py``, ``cli_chat.py``): ``entries`` entries keyed and filled from :data:`WORDS`,
drawn from the ``rng`` given (a caller that draws more from it, such as a chat's messages,
gets the same data as before the book was shared)."""

from __future__ import annotations

import random
from typing import Any

__all__ = ["WORDS", "random_lorebook"]

WORDS = [f"w{i}" for i in range(5_000)]


def random_lorebook(entries: int, rng: random.Random) -> dict[str, Any]:
    """A world-info file of ``entries`` entries: one to three keys each, twelve words of
    content, a random order and position (before or after the card, or at a depth)."""
    book: dict[str, Any] = {"entries": {}}
    for uid in range(entries):
        book["entries"][str(uid)] = {
            "uid": uid,
            "key": [rng.choice(WORDS) for _ in range(rng.randint(1, 3))],
            "keysecondary": [],
            "content": f"Lore {uid}: " + " ".join(rng.choice(WORDS) for _ in range(12)),
            "order": rng.randint(1, 300),
            "position": rng.choice([0, 1, 4]),
            "depth": 4,
            "probability": 100,
            "useProbability": True,
            "selective": True,
            "selectiveLogic": 0,
            "group": "",
        }
    return book
