"""One embedded model per Tavern: chat turns and generate_task share one LocalLlamaProvider,
so the model file is loaded once. A stand-in for ``llama_cpp`` counts the loads (no
llama-cpp-python or model file needed)."""

from __future__ import annotations

import json
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tavernkit.facade import Tavern
from tavernkit.models.settings import Settings
from tavernkit.providers import local_llama

from .conftest import CARD


class FakeLlama:
    """llama-cpp-python's chunk shapes for a fixed reply; every instance is one model load."""

    loads: list[str] = []  # noqa: RUF012 - reset by the fixture
    metadata: dict[str, str] = {}  # noqa: RUF012

    def __init__(self, *, model_path: str, **_: Any) -> None:
        FakeLlama.loads.append(model_path)
        self.calls: list[dict[str, Any]] = []

    def _chunks(self, chat: bool, reply: str) -> Iterator[dict[str, Any]]:
        if chat:
            yield {"id": "c", "choices": [{"delta": {"role": "assistant"}}]}
        for n, word in enumerate(reply.split(" ")):
            piece = word if n == 0 else " " + word
            body = {"delta": {"content": piece}} if chat else {"text": piece}
            yield {"id": "c", "choices": [{**body, "finish_reason": None}]}
        end = {"delta": {}} if chat else {"text": ""}
        yield {"id": "c", "choices": [{**end, "finish_reason": "stop"}]}

    def create_chat_completion(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.calls.append(kwargs)
        return self._chunks(True, f"Reply {len(self.calls)}.")

    def create_completion(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.calls.append(kwargs)
        return self._chunks(False, f"Reply {len(self.calls)}.")

    def tokenize(self, data: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return list(range(len(data.split()) + (1 if add_bos else 0)))


@pytest.fixture
def fake_llama(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> type[FakeLlama]:
    FakeLlama.loads = []
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    module = types.SimpleNamespace(Llama=FakeLlama)
    monkeypatch.setattr(local_llama, "import_llama_cpp", lambda: module)
    monkeypatch.setattr(local_llama, "require_model_path", lambda: model)
    return FakeLlama


async def test_turns_and_tasks_of_one_tavern_load_the_model_once(
    tmp_path: Path, fake_llama: type[FakeLlama]
) -> None:
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        await tk.library.import_bytes(json.dumps(CARD).encode(), source="mira.json")
        settings = Settings()
        settings.selections.user_name = "Ada"
        await tk.store.put_settings(settings)
        info = await tk.chats.new_chat("Mira")  # no profile configured: the embedded model
        first = await tk.chats.send(info.id, "Hello")
        second = await tk.chats.send(info.id, "And again")
        assert first.status == second.status == "completed", (first.error, second.error)
        assert (first.text, second.text) == ("Reply 1.", "Reply 2.")
        task = await tk.context(info.id).generate_task([{"role": "user", "content": "Sum up."}])
        assert task.assistant_text == "Reply 3."
        assert len(fake_llama.loads) == 1
    async with Tavern(tmp_path / "home", load_plugins=False) as other:
        # another Tavern (another process, say) has its own
        out = await other.chats.send(info.id, "Hi")
        assert out.status == "completed"
        assert len(fake_llama.loads) == 2
