"""What a chat turn's stages share: :class:`TurnDeps`, the service's parts in one value.

Every stage of a turn (:mod:`.prepare`'s load, resolve and build; :mod:`.run`'s generate)
takes the deps and the turn's own draft instead of a dozen keywords passed down level by
level: the store and its owner, the provider resolution's parts (HTTP client, embedded model
factory, environment, provider sources), the prompt renderer, the memory step, the plugins,
the clocks and the RNG. The chat service assembles them at the start of each turn (a few
attribute reads): the HTTP client is the runtime's pool of the running event loop, so it is
taken inside the turn, not when the service is made.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pluggy

from tavernkit.generation.attempt.sending import Sleep
from tavernkit.generation.profiles import LocalFactory, ResolvedConnection, resolve_connection
from tavernkit.memory.turn import TurnMemory
from tavernkit.models.profile import ConnectionProfile
from tavernkit.providers.sources import ProviderSource
from tavernkit.store.protocol import Store
from tavernkit.text.render import PromptRenderer

__all__ = ["TurnDeps", "resolve_profile"]


@dataclass(frozen=True, slots=True)
class TurnDeps:
    """The parts every stage of a chat turn may use (see the module docstring).

    ``rng`` draws the world-info scan's probabilities (``None``: ``Math.random``'s stand-in);
    ``clock`` and ``sleep`` time the turn runner's attempts and back-offs.
    """

    store: Store
    owner: str
    client: Any = None
    local_factory: LocalFactory | None = None
    environ: Mapping[str, str] | None = None
    sources: Mapping[str, ProviderSource] | None = None
    renderer: PromptRenderer | None = None
    memory: TurnMemory | None = None
    plugins: pluggy.PluginManager | None = None
    rng: Callable[[], float] | None = None
    clock: Callable[[], float] = time.monotonic
    sleep: Sleep = asyncio.sleep

    async def resolve(
        self, profile: ConnectionProfile | None, model: str = ""
    ) -> ResolvedConnection:
        """``profile`` (the embedded model for ``None``) resolved with the store's keys."""
        return await resolve_profile(
            self.store,
            profile,
            owner=self.owner,
            model=model,
            client=self.client,
            local_factory=self.local_factory,
            environ=self.environ,
            sources=self.sources,
        )


async def resolve_profile(
    store: Store,
    profile: ConnectionProfile | None,
    *,
    owner: str,
    model: str = "",
    client: Any = None,
    local_factory: LocalFactory | None = None,
    environ: Mapping[str, str] | None = None,
    sources: Mapping[str, ProviderSource] | None = None,
) -> ResolvedConnection:
    """``profile`` (the embedded model for ``None``) resolved with the store's keys."""

    async def load_secret(key_id: str) -> str:
        return await store.get_api_key_secret(key_id, owner=owner)

    return await resolve_connection(
        profile,
        model_override=model,
        load_secret=load_secret,
        client=client,
        local_factory=local_factory,
        environ=environ,
        sources=sources,
    )
