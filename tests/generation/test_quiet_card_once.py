"""generate_quiet_prompt evaluates the card once: the world-info scan and the prompt see the
same ``{{random}}`` roll in the description (SillyTavern's ``Generate`` evaluates the card
fields once and hands that text to both)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tavernkit.models.chat import Message
from tavernkit.models.lorebook import Lorebook

from . import _helpers
from ._helpers import CARD, context, profile, setup_tavern
from ._scripted_server import Reply, ScriptedServer

# each roll is 50/50: 24 of them show both sides but once in 8 million runs (8 did once in 128)
RUNS = 24


async def test_quiet_prompt_scans_the_card_text_the_prompt_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = Lorebook()
    for side in ("north", "south"):
        book.new_entry(
            key=[f"Faces {side}"], content=f"LORE-{side.upper()}", match_character_description=True
        )
    card = copy.deepcopy(CARD)
    card["data"]["description"] = (
        "{{setvar::side::{{random::north::south}}}}Faces {{getvar::side}}."
    )
    monkeypatch.setattr(_helpers, "CARD", card)  # the card setup_tavern stores
    async with ScriptedServer([Reply(text="ok") for _ in range(RUNS)]) as server:
        history = [Message.new("Ada", "Which way?", is_user=True)]
        tk, chat_id = await setup_tavern(
            tmp_path, [profile(server.base_url + "/v1")], books={"compass": book}, chat=history
        )
        try:
            ctx = context(tk, chat_id)
            for _ in range(RUNS):
                await ctx.generate_quiet_prompt("Which way does she face?")
        finally:
            await tk.close()
    sides = set()
    for sent in server.requests:
        dumped = json.dumps(sent.body["messages"])
        side = "north" if "Faces north." in dumped else "south"
        other = "south" if side == "north" else "north"
        sides.add(side)
        assert f"Faces {side}." in dumped and f"Faces {other}." not in dumped
        assert f"LORE-{side.upper()}" in dumped and f"LORE-{other.upper()}" not in dumped
    assert len(server.requests) == RUNS
    assert sides == {"north", "south"}
