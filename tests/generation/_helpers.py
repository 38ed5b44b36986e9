"""Shared set-up for the generate_task tests: a Tavern with a character, a preset, a profile
pointing at a scripted server or a mock transport."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2

from tavernkit.context import TavernContext
from tavernkit.facade import Tavern
from tavernkit.models.chat import ChatHeader, Message
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.profile import CapabilityOverrides, ConnectionProfile
from tavernkit.models.settings import Settings
from tavernkit.providers.retry import RetryPolicy

CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Mira",
        "description": "Mira is a lighthouse keeper who talks to {{user}}.",
        "personality": "dry, kind",
        "scenario": "",
        "first_mes": "Evening.",
        "mes_example": "",
    },
}

NO_RETRY = RetryPolicy(max_retries=0)


def profile(
    base_url: str,
    *,
    name: str = "test",
    source: str = "custom",
    model: str = "scripted-model",
    tools: bool | None = True,
    json_schema: bool | None = None,
    api: str = "chat",
    images: bool | None = True,
) -> ConnectionProfile:
    return ConnectionProfile(
        name=name,
        api=api,  # type: ignore[arg-type]
        source=source,
        base_url=base_url,
        model=model,
        capabilities=CapabilityOverrides(
            supports_tools=tools, native_json_schema=json_schema, supports_images=images
        ),
    )


async def setup_tavern(
    home: Path,
    profiles: list[ConnectionProfile],
    *,
    active: str | None = None,
    preset: ChatCompletionPreset | None = None,
    books: dict[str, Lorebook] | None = None,
    chat: list[Message] | None = None,
    settings_edit: Callable[[Settings], None] | None = None,
) -> tuple[Tavern, str | None]:
    tk = await Tavern(home, load_plugins=False).open()
    await tk.store.put("character", CARD)
    for item in profiles:
        await tk.store.put("connection_profile", item, name=item.name)
    preset = preset or ChatCompletionPreset.create(stream_openai=False)
    await tk.store.put("chat_preset", preset, name="Default")
    settings = Settings()
    settings.selections.character = "Mira"
    settings.selections.chat_preset = "Default"
    settings.selections.user_name = "Ada"
    settings.selections.profile = active or (profiles[0].name if profiles else None)
    for name, book in (books or {}).items():
        await tk.store.put("lorebook", book, name=name)
        settings.world_info.global_books.append(name)
    if settings_edit is not None:
        settings_edit(settings)
    await tk.store.put_settings(settings)
    chat_id = None
    if chat is not None:
        info = await tk.store.create_chat(ChatHeader.new(), chat, name="c1", character="Mira")
        chat_id = info.id
    return tk, chat_id


def context(tk: Tavern, chat_id: str | None = None, **kw: Any) -> TavernContext:
    kw.setdefault("retry", NO_RETRY)
    kw.setdefault("rng", random.Random(7))
    return tk.context(chat_id, **kw)


def mock_client(handler: Callable[[httpx2.Request], httpx2.Response]) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
