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


async def test_swipes_sample_anew_without_a_seed(tmp_path: Path) -> None:
    """The default preset sets no seed (-1): each swipe is a new draw, not the same reply."""
    from tavernkit.cli.chat import ensure_character

    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        chats = ChatService(tk)
        info = await chats.new_chat(await ensure_character(tk, None))
        small = {"max_tokens": 16}
        first = await chats.send(info.id, "Tell me about the sea.", overrides=small)
        texts = {first.text}
        for _ in range(2):
            texts.add((await chats.swipe(info.id, overrides=small)).text)
        assert len(texts) >= 2, texts


async def test_a_stop_during_prompt_evaluation_hands_back_at_once(tmp_path: Path) -> None:
    import asyncio
    import time

    from tavernkit.cli.chat import ensure_character
    from tavernkit.generation.abort import AbortController

    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        chats = ChatService(tk)
        info = await chats.new_chat(await ensure_character(tk, None))
        controller = AbortController()
        fired: list[float] = []

        def stop() -> None:
            fired.append(time.perf_counter())
            controller.abort("user stop")

        # the model loads first (not part of the stop): time the stop once it is loaded
        await chats.send(info.id, "Hi.", overrides={"max_tokens": 2})
        asyncio.get_running_loop().call_later(0.3, stop)
        long_message = "Tell me everything about the lighthouse and the reef. " * 60
        out = await chats.send(info.id, long_message, abort=controller.signal)
        back = time.perf_counter()
        assert out.status == "aborted"
        assert fired
        assert back - fired[0] < 0.5
        stored = await chats.load(info.id)
        # nothing of the abandoned decode arrives later
        await asyncio.sleep(1.0)
        assert (await chats.load(info.id)).messages[-1].data == stored.messages[-1].data
