"""The one-entry SillyTavern world-info file the chat tests scan ("tide" -> "The tide turns
at nine."), made fresh for each caller so a test may change it."""

from __future__ import annotations

from typing import Any

__all__ = ["TIDE", "tide_lorebook"]

TIDE = "The tide turns at nine."


def tide_lorebook(**entry: Any) -> dict[str, Any]:
    """The book, its entry's fields updated with ``entry`` (``sticky=3``...)."""
    tide = {
        "uid": 0,
        "key": ["tide"],
        "keysecondary": [],
        "comment": "Tides",
        "content": TIDE,
        "constant": False,
        "selective": False,
        "order": 100,
        "position": 0,
        "disable": False,
    }
    return {"entries": {"0": {**tide, **entry}}}
