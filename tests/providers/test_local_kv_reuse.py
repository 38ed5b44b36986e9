"""The embedded model's KV cache across the turns of real chats: the demo card (Wren, whose
lorebook entries come and go near the top of the prompt) through the whole turn path.

Skipped when the ``local`` extra or the GGUF is absent. Sampling is random: the assertions are
on how much of each prompt llama.cpp evaluated, not on the text."""

from __future__ import annotations

from pathlib import Path

import pytest

from tavernkit.cli.chat import ensure_character
from tavernkit.facade import Tavern
from tavernkit.providers.local_engine import local_model_missing

pytestmark = pytest.mark.skipif(
    local_model_missing() is not None, reason=str(local_model_missing())
)

A_TURNS = (
    "Hello! Who are you?",
    "What is it like living in a lighthouse?",
    "Have you ever seen a shipwreck?",
    "What do you do when a storm comes?",
    "Tell me about the strangest night you remember.",
)
B_TURNS = ("Is the causeway safe at night?", "How often do you wind the lamp?", "Why stay?")
#: at most this share of a prompt evaluated again on a later turn: the new messages, and a
#: lorebook entry that came in (each is tens of tokens in prompts of 600-800)
NEW_SHARE = 0.2


async def _turn(tk: Tavern, chat: str, text: str) -> tuple[int, int]:
    """``(prompt tokens, of them evaluated)`` of one turn."""
    out = await tk.chats.send(chat, text, overrides={"max_tokens": 24})
    assert out.status == "completed"
    assert out.result is not None
    usage = out.result.usage
    assert usage is not None
    assert usage.input_tokens is not None
    assert usage.cached_input_tokens is not None
    return usage.input_tokens, usage.input_tokens - usage.cached_input_tokens


async def test_from_the_second_turn_on_only_the_new_messages_are_evaluated(
    tmp_path: Path,
) -> None:
    """Five turns of the demo chat; then a second chat of the same card interleaved with the
    first keeps its own cache, and the first keeps its own."""
    async with Tavern(tmp_path, load_plugins=False) as tk:
        character = await ensure_character(tk, None)
        a = (await tk.chats.new_chat(character)).id
        turns = [await _turn(tk, a, text) for text in A_TURNS[:3]]
        b = (await tk.chats.new_chat(character)).id
        b_turns = []
        for a_text, b_text in zip(A_TURNS[3:], B_TURNS[:2], strict=True):
            b_turns.append(await _turn(tk, b, b_text))
            turns.append(await _turn(tk, a, a_text))
        b_turns.append(await _turn(tk, b, B_TURNS[2]))
    assert turns[0][1] == turns[0][0]  # a fresh chat: all of it
    for n, (prompt, evaluated) in enumerate(turns[1:], 2):
        assert evaluated <= NEW_SHARE * prompt, f"turn {n} of chat A: {turns}"
    for n, (prompt, evaluated) in enumerate(b_turns[1:], 2):
        assert evaluated <= NEW_SHARE * prompt, f"turn {n} of chat B: {b_turns}"
