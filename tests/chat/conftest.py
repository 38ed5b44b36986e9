"""A Tavern wired to a scripted OpenAI-compatible server on loopback, with a demo card."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tavernkit.chat import ChatService
from tavernkit.facade import Tavern
from tavernkit.models.profile import ConnectionProfile
from tavernkit.models.settings import Settings

from ._server import HangingServer

CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Mira",
        "description": "{{char}} keeps the ferry. {{user}} is a passenger.",
        "personality": "calm",
        "scenario": "A ferry crossing at dusk.",
        "first_mes": "Welcome aboard, {{user}}.",
        "mes_example": "",
        "alternate_greetings": ["Mind the gap, {{user}}.", "Tickets, please."],
        "creator_notes": "",
        "system_prompt": "",
        "post_history_instructions": "",
        "tags": [],
        "creator": "tests",
        "character_version": "1",
        "extensions": {},
    },
}


class StepClock:
    """A wall clock that moves one second per reading (message dates stay ordered)."""

    def __init__(self) -> None:
        self.now = datetime(2025, 1, 31, 14, 5, 9, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@dataclass
class World:
    tk: Tavern
    chats: ChatService
    server: HangingServer


async def make_world(home: Path, server: HangingServer) -> Tavern:
    tk = await Tavern(home, load_plugins=False).open()
    await stock_world(tk, server.base_url)
    return tk


async def stock_world(tk: Tavern, base_url: str) -> None:
    """Mira, a profile on the scripted server at ``base_url`` selected, and Ada as the user,
    in an open Tavern."""
    await tk.library.import_bytes(json.dumps(CARD).encode(), source="mira.json")
    profile = ConnectionProfile(
        name="scripted", api="chat", source="openai", base_url=base_url + "/v1", model="m1"
    )
    await tk.store.put("connection_profile", profile, owner=tk.owner)
    settings = Settings()
    settings.selections.profile = "scripted"
    settings.selections.user_name = "Ada"
    await tk.store.put_settings(settings, owner=tk.owner)


async def use_profile(world: World, name: str, **fields: Any) -> None:
    """Store an OpenAI-compatible profile on the scripted server (``fields`` on top) and make
    it the active one."""
    profile = ConnectionProfile.model_validate(
        {"name": name, "source": "openai", "base_url": world.server.base_url + "/v1", **fields}
    )
    await world.tk.store.put("connection_profile", profile)
    settings = await world.tk.settings()
    settings.selections.profile = profile.name
    await world.tk.store.put_settings(settings)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async with HangingServer() as server:
        tk = await make_world(tmp_path / "home", server)
        try:
            chats = ChatService(
                tk.runtime, clock=StepClock(), new_id=lambda: "id-1", stream_interval=0
            )
            yield World(tk, chats, server)
        finally:
            await tk.close()
