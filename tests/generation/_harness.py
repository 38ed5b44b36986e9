"""Building plans against the scripted upstream: routes, key pools, a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import httpx2

from tavernkit.errors import NotFound
from tavernkit.generation.keys import (
    CooldownStore,
    CredentialSource,
    InMemoryCooldownStore,
    KeyPool,
    PoolKey,
)
from tavernkit.generation.plan import (
    Admission,
    AttemptTarget,
    DeferredRoute,
    EndpointRef,
    FundingScope,
    Plan,
    PlanEntry,
    TurnContext,
    Unusable,
)
from tavernkit.providers.anthropic import AnthropicAdapter
from tavernkit.providers.http import Timeouts
from tavernkit.providers.openai_chat import OpenAIChatAdapter
from tavernkit.providers.openai_text import OpenAITextAdapter
from tavernkit.providers.profiles import FAMILY_DEFAULTS, ModelProfile
from tavernkit.providers.provider import Provider

from ._upstream import ScriptedUpstream

ALICE = FundingScope("user", "alice", workspace="dm-alice")
SERVER = FundingScope("server", "guild-1", workspace="guild-1", kind="server")


class FakeClock:
    """Epoch-like seconds that only move when the runner sleeps or a test says so."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []
        self.on_sleep: Callable[[float], None] | None = None

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            self.on_sleep(seconds)
        await asyncio.sleep(0)


@dataclass
class Route:
    """A test's description of one plan entry and how to reach it."""

    model: str
    family: str = "openai"
    keys: Sequence[str] = ("k1",)
    source: str | None = None
    endpoint: EndpointRef | None = None
    supports_prefill: bool = True
    supports_tools: bool = True
    supports_vision: bool = True
    context_window: int = 32_000
    max_output_tokens: int = 4096
    tools_enabled: bool = True
    samplers: dict[str, Any] = field(default_factory=dict)
    user_max_tokens: int | None = None
    credential: CredentialSource = "user"

    def entry(self) -> PlanEntry:
        return PlanEntry(self.model, self.family, self.source, self.endpoint)

    def profile(self) -> ModelProfile:
        return replace(
            FAMILY_DEFAULTS[self.family],
            model=self.model,
            supports_prefill=self.supports_prefill,
            supports_tools=self.supports_tools,
            supports_vision=self.supports_vision,
            context_window=self.context_window,
            max_output_tokens=self.max_output_tokens,
        )


@dataclass
class World:
    """Everything a plan needs, with spies on what was loaded."""

    upstream: ScriptedUpstream
    client: httpx2.AsyncClient
    clock: FakeClock
    cooldowns: CooldownStore = field(default_factory=InMemoryCooldownStore)
    timeouts: Timeouts = field(default_factory=lambda: Timeouts(first_byte=5, idle=5))
    loaded_secrets: list[str] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)
    routes: dict[tuple[str, str], Route] = field(default_factory=dict)

    def _provider(self, route: Route, secret: str | None) -> Provider:
        if route.family == "text":
            return Provider(
                "textgen",
                self.upstream.base_url + "/v1",
                OpenAITextAdapter(dialect="openai"),
                model=route.model,
                keys=secret,
                key_required=True,
                client=self.client,
                timeouts=self.timeouts,
            )
        if route.family == "anthropic":
            return Provider(
                "anthropic",
                self.upstream.base_url,
                AnthropicAdapter(),
                model=route.model,
                auth="x-api-key",
                keys=secret,
                key_required=True,
                client=self.client,
                timeouts=self.timeouts,
            )
        return Provider(
            "openai",
            self.upstream.base_url + "/v1",
            OpenAIChatAdapter(),
            model=route.model,
            keys=secret,
            key_required=True,
            client=self.client,
            timeouts=self.timeouts,
        )

    def pool(self, route: Route, owner: str) -> KeyPool:
        secrets = {f"{route.model}#{i}": s for i, s in enumerate(route.keys)}

        async def load(key: PoolKey) -> str:
            if key.key_id not in secrets:
                raise NotFound(key.key_id)
            self.loaded_secrets.append(secrets[key.key_id])
            return secrets[key.key_id]

        return KeyPool(
            owner,
            route.family,
            [PoolKey(k, source=route.credential) for k in secrets],
            source=route.credential,
            load_secret=load,
            store=self.cooldowns,
            clock=self.clock,
        )

    async def resolve(self, entry: PlanEntry, scope: FundingScope) -> AttemptTarget:
        route = self.routes[(entry.model, entry.effective_source)]
        self.resolved.append(entry.model)
        if not route.keys:
            raise Unusable("no saved key")
        return AttemptTarget(
            make_provider=lambda secret: self._provider(route, secret),
            profile=route.profile(),
            pool=self.pool(route, scope.payer_id),
            tools_enabled=route.tools_enabled,
            samplers=route.samplers,
            user_max_tokens=route.user_max_tokens,
        )

    def plan(
        self,
        routes: Sequence[Route],
        *,
        scope: FundingScope = ALICE,
        context: TurnContext | None = None,
        deferred: tuple[FundingScope, Sequence[Route]] | None = None,
        admission: Admission | None = None,
        **kwargs: Any,
    ) -> Plan:
        for route in routes:
            self.routes[(route.model, route.entry().effective_source)] = route
        deferred_route = None
        if deferred is not None:
            dscope, droutes = deferred
            for route in droutes:
                self.routes[(route.model, route.entry().effective_source)] = route
            self.deferred_calls = 0

            async def thunk() -> Sequence[PlanEntry]:
                self.deferred_calls += 1
                return [r.entry() for r in droutes]

            deferred_route = DeferredRoute(dscope, thunk)
        return Plan(
            [r.entry() for r in routes],
            resolver=self.resolve,
            scope=scope,
            context=context or TurnContext("alice", workspace="dm-alice"),
            deferred=deferred_route,
            admission=admission,
            **kwargs,
        )


def allow_all() -> Callable[[Any], Awaitable[bool]]:
    async def admit(_: Any) -> bool:
        return True

    return admit
