"""A real chat with the embedded model, through the whole turn path (card, macros, the GGUF's
chat template, the slot router): from the second turn on, llama.cpp reuses the previous turn's
prompt from its KV cache and evaluates only the new messages (issue 40).

The card is the demo's without its lorebook, so nothing but the history changes between turns
(an entry coming in is the documented exception: test_local_kv_reuse.py). Skipped when the
``local`` extra or the GGUF is absent."""

from __future__ import annotations

import json
from importlib import resources
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from tavernkit.facade import Tavern
from tavernkit.providers.local_engine import local_model_missing

TURNS = (
    "Hello! Who are you?",
    "What is it like living out here?",
    "What do you eat for breakfast?",
    "Tell me about the strangest night you remember.",
    "Do you ever get lonely?",
)
#: the new messages of a turn: the reply before it, the user's line and the template's markers
#: (replies are capped at 24 tokens here)
NEW_TOKENS = 24 + 40


def card_without_lorebook() -> bytes:
    data: dict[str, Any] = json.loads((resources.files("tavernkit.data") / "wren.json").read_text())
    inner = data.get("data", data)
    inner.pop("character_book", None)
    inner["name"] = "Wren Plain"
    return json.dumps(data).encode()


async def test_every_later_turn_reuses_the_previous_prompt(tmp_path: Path) -> None:
    reason = local_model_missing()
    if reason is not None:
        pytest.skip(reason)
    async with Tavern(tmp_path, load_plugins=False) as tk:
        found = await tk.library.import_bytes(card_without_lorebook(), source="plain.json")
        character = next(r for r in found if r.kind == "character").id
        chat = (await tk.chats.new_chat(character)).id
        turns: list[tuple[int, int, int]] = []  # (prompt tokens, reused, evaluated)
        for text in TURNS:
            out = await tk.chats.send(chat, text, overrides={"max_tokens": 24})
            assert out.result is not None and out.result.usage is not None, out.status
            usage = out.result.usage
            timings = (usage.raw or {})["timings"]
            assert usage.input_tokens is not None
            turns.append((usage.input_tokens, timings["cache_n"], timings["prompt_n"]))
    assert turns[0][1] == 0  # a fresh chat: nothing cached yet
    for (before, _, _), (size, reused, evaluated) in pairwise(turns):
        assert reused >= before, turns  # the whole previous prompt (and the reply after it)
        assert evaluated <= NEW_TOKENS, turns
        assert reused + evaluated == size, turns
