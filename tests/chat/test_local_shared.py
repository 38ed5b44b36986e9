"""One embedded model per Tavern: chat turns and generate_task share one loaded model, so the
GGUF is loaded once. The real model runs; the loads are counted where xllamacpp's ``Server`` is
made (skipped when the embedded model is not installed)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tavernkit.facade import Tavern
from tavernkit.models.settings import Settings
from tavernkit.providers import local_engine
from tavernkit.providers.local_engine import local_model_missing

from .conftest import CARD


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reason = local_model_missing()
    if reason is not None:
        pytest.skip(reason)
    real = local_engine.import_xllamacpp()
    made: list[str] = []

    def server(params: Any) -> Any:
        made.append(params.model.path)
        return real.Server(params)

    module = SimpleNamespace(
        CommonParams=real.CommonParams,
        common_reasoning_format=real.common_reasoning_format,
        Server=server,
    )
    monkeypatch.setattr(local_engine, "import_xllamacpp", lambda: module)
    return made


async def test_turns_and_tasks_of_one_tavern_load_the_model_once(
    tmp_path: Path, loads: list[str]
) -> None:
    small = {"max_tokens": 8}
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        await tk.library.import_bytes(json.dumps(CARD).encode(), source="mira.json")
        settings = Settings()
        settings.selections.user_name = "Ada"
        await tk.store.put_settings(settings)
        info = await tk.chats.new_chat("Mira")  # no profile configured: the embedded model
        first = await tk.chats.send(info.id, "Hello", overrides=small)
        second = await tk.chats.send(info.id, "And again", overrides=small)
        assert first.status == second.status == "completed", (first.error, second.error)
        assert first.text.strip()
        assert second.text.strip()
        task = await tk.context(info.id).generate_task(
            [{"role": "user", "content": "Sum up in three words."}]
        )
        assert task.assistant_text.strip()
        assert len(loads) == 1
    async with Tavern(tmp_path / "home", load_plugins=False) as other:
        # another Tavern (another process, say) has its own
        out = await other.chats.send(info.id, "Hi", overrides=small)
        assert out.status == "completed"
        assert len(loads) == 2
