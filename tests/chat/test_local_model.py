"""A chat turn through the embedded model (skipped when xllamacpp or the model is missing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tavernkit.chat import ChatService
from tavernkit.facade import Tavern
from tavernkit.models.chat import Message
from tavernkit.providers.local_engine import local_model_missing

pytestmark = pytest.mark.skipif(
    local_model_missing() is not None, reason=str(local_model_missing())
)


async def test_send_and_swipe_with_the_embedded_model(tmp_path: Path) -> None:
    from tavernkit.cli.chat import ensure_character

    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        chats = ChatService(tk)
        character = await ensure_character(tk, None)
        info = await chats.new_chat(character)
        small = {"max_tokens": 12}
        out = await chats.send(info.id, "Hello! Who are you?", overrides=small)
        assert out.status == "completed" and out.text.strip()
        assert out.model
        swiped = await chats.swipe(info.id, overrides=small)
        assert swiped.status == "completed" and swiped.swipe_index == 1
        stored = await chats.load(info.id)
        reply = Message.model_validate(stored.messages[-1].data)
        assert reply.swipes == [out.text, swiped.text]
        assert all(m.partial_swipes == () for m in stored.messages)
