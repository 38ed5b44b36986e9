"""Cards and records the route tests upload."""

from __future__ import annotations

import copy
import json
from typing import Any

#: a V2 card with only the fields the tests read (the rest take their defaults)
CARD: dict[str, Any] = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Mira",
        "description": "{{char}} keeps the ferry.",
        "first_mes": "Welcome aboard, {{user}}.",
        "alternate_greetings": ["Mind the gap, {{user}}.", "Tickets, please."],
    },
}


def card(name: str) -> dict[str, Any]:
    out = copy.deepcopy(CARD)
    out["data"]["name"] = name
    return out


def card_file(name: str) -> tuple[str, bytes, str]:
    """A multipart ``file`` part holding the card as JSON."""
    return (f"{name}.json", json.dumps(card(name)).encode(), "application/json")


LOREBOOK: dict[str, Any] = {
    "name": "Harbour",
    "entries": {
        "0": {"uid": 0, "key": ["ferry"], "content": "The ferry leaves at dusk.", "comment": "f"}
    },
}

PRESET: dict[str, Any] = {"name": "Warm", "temperature": 0.9, "chat_completion_source": "openai"}
