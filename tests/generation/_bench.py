"""A Tavern on a scripted upstream (loopback) for the fault matrix and the key/plan tests.

One profile ``p`` (model ``m1``) with a pool of stored keys and/or environment keys, optionally
a fallback chain to ``p`` with model ``m2`` (the same keys), and short timeouts of its own.
``Bench.chats`` is a :class:`ChatService`; ``Bench.context()`` the Tavern's context, with the
same environment, so chat turns and tasks share one Tavern's cooldowns.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tavernkit.chat import ChatService, TurnOutcome
from tavernkit.context import TavernContext
from tavernkit.facade import Tavern
from tavernkit.generation.sink import RecordingSink
from tavernkit.models.chat import Message
from tavernkit.models.profile import (
    ConnectionProfile,
    CredentialRef,
    FallbackChain,
    FallbackEntry,
    ProfileTimeouts,
)
from tavernkit.models.settings import Settings

from ._upstream import ScriptedUpstream

SECRETS = ("sk-fault-key-one-0000000001", "sk-fault-key-two-0000000002")
ENV = {"TK_KEY_A": "sk-env-key-aaaa-0000000001", "TK_KEY_B": "sk-env-key-bbbb-0000000002"}
USER_TEXT = "Tell me of the tide."
CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {"name": "Mira", "description": "{{char}} keeps the ferry.", "first_mes": "Hello."},
}
FAST = ProfileTimeouts(connect=2, first_byte=0.3, idle=0.2)


@dataclass
class Bench:
    tk: Tavern
    upstream: ScriptedUpstream
    key_ids: list[str]
    environ: Mapping[str, str]
    client: httpx2.AsyncClient | None = None
    chat_id: str = ""
    chats: ChatService = field(init=False)

    def __post_init__(self) -> None:
        self.chats = self.service()

    def service(self, **options: Any) -> ChatService:
        """A chat service on this bench's Tavern (a new one: nothing kept in it)."""
        return ChatService(
            self.tk.runtime,
            stream_interval=0,
            environ=self.environ,
            client=self.client,
            **options,
        )

    def context(self, **options: Any) -> TavernContext:
        return self.tk.context(self.chat_id or None, environ=self.environ, **options)

    async def send(self, chats: ChatService | None = None) -> tuple[TurnOutcome, RecordingSink]:
        sink = RecordingSink()
        out = await (chats or self.chats).send(self.chat_id, USER_TEXT, sink=sink)
        return out, sink

    async def messages(self) -> list[Message]:
        stored = await self.chats.load(self.chat_id)
        return [Message.model_validate(m.data) for m in stored.messages]

    async def cooldown(
        self, key_id: str, model: str = "m1", *, now: float | None = None
    ) -> float | None:
        """Seconds the stored key ``key_id`` still rests for ``model`` (``None``: it does
        not), at ``now`` (default: the wall clock)."""
        state = await self.tk.store.get_key_state(key_id, owner=self.tk.owner, model=model)
        if state.cooldown_until is None:
            return None
        return state.cooldown_until.timestamp() - (time.time() if now is None else now)

    @property
    def keys(self) -> list[str | None]:
        return [r.key for r in self.upstream.requests]

    @property
    def models(self) -> list[str]:
        return [r.body["model"] for r in self.upstream.requests]


async def open_bench(
    home: Path,
    upstream: ScriptedUpstream,
    *,
    keys: int = 1,
    env_keys: Sequence[str] = (),
    chain: bool = False,
    timeouts: ProfileTimeouts = FAST,
    client: httpx2.AsyncClient | None = None,
) -> Bench:
    tk = await Tavern(home, load_plugins=False).open()
    await tk.library.import_bytes(json.dumps(CARD).encode(), source="mira.json")
    key_ids = [
        await tk.store.add_api_key("openai", secret, owner=tk.owner) for secret in SECRETS[:keys]
    ]
    refs = [CredentialRef(key_id=k) for k in key_ids] + [CredentialRef(env=e) for e in env_keys]
    profile = ConnectionProfile(
        name="p",
        source="openai",
        base_url=upstream.base_url + "/v1",
        model="m1",
        credentials=refs,
        timeouts=timeouts,
        fallback_chain="backup" if chain else None,
    )
    await tk.store.put("connection_profile", profile)
    if chain:
        entries = [FallbackEntry(profile="p", model="m2")]
        await tk.store.put("fallback_chain", FallbackChain(name="backup", entries=entries))
    settings = Settings()
    settings.selections.profile = "p"
    await tk.store.put_settings(settings)
    bench = Bench(tk, upstream, key_ids, ENV, client)
    bench.chat_id = (await bench.chats.new_chat("Mira")).id
    return bench


MakeBench = Callable[..., Awaitable[Bench]]


@pytest.fixture
async def make_bench(
    tmp_path: Path, upstream: ScriptedUpstream, no_gc_pauses: None
) -> AsyncIterator[MakeBench]:
    # FAST's limits are tenths of a second: no collector pause may outlast one (no_gc_pauses)
    made: list[Bench] = []

    async def make(**options: Any) -> Bench:
        bench = await open_bench(tmp_path / f"home{len(made)}", upstream, **options)
        made.append(bench)
        return bench

    yield make
    for bench in made:
        await bench.tk.close()
