"""``Runtime``: what the services below the facade share — one data dir's store, its owner, the
plugin manager, the prompt renderer, the tool registry, the running generations, the key
cooldowns of environment keys, the embedded models and the clock.

:class:`~tavernkit.facade.Tavern` builds one and passes it down: the chat service, the plugin
context (:class:`~tavernkit.context.TavernContext`) and the request API take a ``Runtime``, never
the Tavern, so nothing below the facade imports the facade. The store is attached when the
Tavern opens and detached when it closes; reading it in between is a clear error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx2
import pluggy

from tavernkit.egress import EgressPolicy
from tavernkit.errors import TavernKitError
from tavernkit.generation.abort import ActiveGenerations
from tavernkit.generation.keys import CooldownStore, InMemoryCooldownStore
from tavernkit.generation.profiles import ProviderLike, local_provider
from tavernkit.memory.spaces import MemorySpaces
from tavernkit.models.profile import ConnectionProfile
from tavernkit.models.settings import Settings
from tavernkit.providers.pool import HttpPool
from tavernkit.providers.profiles import LOCAL_MODEL_NAME, ModelProfile
from tavernkit.providers.sources import ProviderSources
from tavernkit.store.protocol import Store
from tavernkit.text.render import ChatLunaRenderService, PromptRenderer
from tavernkit.tools.mcp_source import McpTools
from tavernkit.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from tavernkit.stscript import CommandRegistry

__all__ = ["LocalModels", "Runtime"]


class LocalModels:
    """The embedded models of one runtime, by model name: each made on first use and shared
    by every chat turn and task, so a model file (hundreds of MB) is loaded once per process,
    not once per turn. The model profile is passed with each call, so sharing loses nothing."""

    def __init__(self, make: Callable[[ConnectionProfile, ModelProfile], ProviderLike]) -> None:
        self._make = make
        self._made: dict[str, ProviderLike] = {}

    def __call__(self, profile: ConnectionProfile, model_profile: ModelProfile) -> ProviderLike:
        name = profile.model or LOCAL_MODEL_NAME
        provider = self._made.get(name)
        if provider is None:
            provider = self._made[name] = self._make(profile, model_profile)
        return provider


class PooledClient:
    """A ``client`` attribute for the objects that hold a ``runtime`` and the client they were
    given (``_client``): that one, else the runtime's pool (one connection reused from turn to
    turn, not a handshake per request; ``None`` outside an event loop)."""

    def __get__(self, obj: Any, owner: type | None = None) -> httpx2.AsyncClient | None:
        given: httpx2.AsyncClient | None = obj._client
        return given if given is not None else obj.runtime.http.client()

    def __set__(self, obj: Any, value: httpx2.AsyncClient | None) -> None:
        obj._client = value


class Runtime:
    """The shared parts of one Tavern (see the module docstring). ``clock`` (epoch seconds) is
    the default clock of key cooldowns."""

    def __init__(
        self,
        *,
        owner: str,
        plugins: pluggy.PluginManager,
        tools: ToolRegistry | None = None,
        prompt_renderer: PromptRenderer | None = None,
        local_models: LocalModels | None = None,
        provider_sources: ProviderSources | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.owner = owner
        self.plugins = plugins
        #: function tools offered to this runtime's chats (never shared between Taverns)
        self.tools = tools if tools is not None else ToolRegistry()
        #: the template service every prompt evaluates its macros through
        self.prompt_renderer = prompt_renderer or PromptRenderer()
        #: ChatLuna's prompt renderer service (its ``{name}`` dialect), with the same URL policy
        self.chatluna_renderer = ChatLunaRenderService(url=self.prompt_renderer.url_policy)
        #: generations running now, by chat (``stop_generation`` / ``streaming_processor``)
        self.generations = ActiveGenerations()
        #: cooldowns and use counts of keys read from environment variables, shared by every
        #: chat turn and task (a stored key's live in the store, across processes; an
        #: environment key has no row there, so it rests here: this process's memory, or
        #: Redis for a server of several processes)
        self.key_cooldowns: CooldownStore = InMemoryCooldownStore()
        self.local_models = local_models or LocalModels(local_provider)
        #: memory's vector collections (chat memory, vectorized lorebook entries)
        self.memory = MemorySpaces()
        self.clock = clock
        #: hosted APIs plugins added (``register_providers``), by profile ``source``
        self.provider_sources = (
            provider_sources if provider_sources is not None else ProviderSources()
        )
        #: the owner's MCP servers; their tools are offered through ``tools`` like native ones
        self.mcp = McpTools(self)
        self.tools.add_source(self.mcp)
        #: the connections to hosted APIs every provider call of this runtime shares
        self.http = HttpPool()
        #: STscript commands with the plugins' (``register_script_commands``); None: built-ins
        self.script_commands: CommandRegistry | None = None
        self._store: Store | None = None

    @property
    def egress(self) -> EgressPolicy | None:
        """The egress policy every outbound request of this runtime goes through (a server's
        non-admin user: :mod:`tavernkit.egress`); ``None``, the default: none."""
        return self.http.egress

    @egress.setter
    def egress(self, policy: EgressPolicy | None) -> None:
        self.http.set_egress(policy)

    @property
    def store(self) -> Store:
        if self._store is None:
            raise TavernKitError("the Tavern is not open: use 'async with Tavern() as tk'")
        return self._store

    @property
    def is_open(self) -> bool:
        return self._store is not None

    def attach(self, store: Store) -> None:
        self._store = store

    def detach(self) -> Store | None:
        store, self._store = self._store, None
        return store

    async def settings(self) -> Settings:
        """The owner's settings (defaults until some are stored or imported)."""
        stored = await self.store.get_settings(owner=self.owner)
        return stored if isinstance(stored, Settings) else Settings()
