"""The plan of a chat turn: the active profile, its keys, then its fallback chain.

- **Primary**: the resolved connection of the turn (the prompt was built for it).
- **Keys**: a profile with several credentials becomes a :class:`~tavernkit.generation.keys.KeyPool`
  (least-used first, per-key cooldowns). A stored key's cooldown and use count live in the
  store (:class:`~tavernkit.generation.keys.StoreCooldownStore`), so a CLI that starts fresh
  for every message still spreads its calls and still rests a rate-limited key; an
  environment-variable key's live in ``PlanSources.memory`` (the Tavern's, so they outlive the
  turn; the store's key-state rows belong to stored keys), and a mixed pool splits them.
- **Fallbacks**: the profile's ``fallback_chain`` names a stored
  :class:`~tavernkit.models.profile.FallbackChain`; each of its entries (a profile, optionally
  another model, optionally one explicit credential) is one plan entry after the primary. The
  chain hangs off the profile, not the global selections, because a chain is a backup *for* a
  given primary: switching profiles switches backups with it.

The same builder makes the plan of a chat turn and of ``generate_task`` / ``generate_raw`` /
quiet prompts (:func:`task_plan`): plugins and bots get the key pool, its cooldowns and the
fallback chain a chat gets.

Entries are resolved only when the previous attempt failed (no key of a fallback is loaded on
a turn the primary answers). An entry whose prompt family differs from the primary's (a
text-completion fallback behind a chat profile) is skipped: the prompt was built once, for the
primary's family, and a chat prompt cannot be re-folded into a text one here.

- **Randomizer** (brief 003): a chain with ``randomize`` on promotes one member of the pool
  (the primary and the chain's entries) to lead each turn, keeping the rest in order. The
  draw is seeded per turn (``seed``: the chat service passes the turn's identity, so one turn
  always draws the same lead and the next turn draws afresh).
- **Shared route** (brief 003's deferred server route): ``PlanSources.shared`` names a profile
  of another owner (a server's, paid from its keys) that a personal turn falls back to only
  after every personal attempt failed, and only when the route's admission says yes (the
  user's setting, the admin's policy, the route's quota and cooldowns): the plan's
  :class:`~tavernkit.generation.plan.DeferredRoute`. Nothing of it is read on a turn the
  personal attempts answer; its keys are loaded with its own owner, its attempts are paid by
  its scope (``AttemptRecord.paid_by``), and a personal attempt is never admitted against it.
- **Pinned reviewer**: a reviewer profile named by the review settings is one more entry the
  plan can resolve (:func:`pinned_reviewer_spec`), never attempted as an author; it is
  resolved, like a fallback, only when a review runs.

With auto-parse on (SillyTavern's "Parse reasoning"), or a profile whose capabilities say its
model writes reasoning inline (``reasoning_format="tags"``), and a reasoning template with a
prefix and a suffix, every attempt's stream is split into reasoning and reply as it arrives.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast

from tavernkit.errors import NotFound
from tavernkit.generation.attempt.sending import ProviderWrapper
from tavernkit.generation.keys import (
    CooldownStore,
    InMemoryCooldownStore,
    KeyPool,
    PoolKey,
    SplitCooldownStore,
    StoreCooldownStore,
)
from tavernkit.generation.plan import (
    Admission,
    AdmissionRequest,
    AttemptTarget,
    DeferredRoute,
    FundingScope,
    Plan,
    PlanEntry,
    TurnContext,
    Unusable,
)
from tavernkit.generation.profiles import ProviderLike, ResolvedConnection
from tavernkit.models.profile import ConnectionProfile, CredentialRef, FallbackChain
from tavernkit.providers.events import StreamEvent
from tavernkit.providers.http import AbortLike
from tavernkit.providers.profiles import ModelProfile
from tavernkit.providers.provider import Provider
from tavernkit.providers.reasoning_stream import Delimiters, split_tag_reasoning
from tavernkit.providers.request import PromptRequest
from tavernkit.store.protocol import Store

__all__ = [
    "PinnedReviewerSpec",
    "PlanSources",
    "SharedRoute",
    "TagSplittingProvider",
    "chat_plan",
    "entry_source",
    "pinned_reviewer_spec",
    "task_plan",
]

#: resolves a profile (with its credentials) to a connection, as the turn's own was resolved
Resolve = Callable[[ConnectionProfile], Awaitable[ResolvedConnection]]


@dataclass(frozen=True)
class PlanSources:
    """What building a chat plan reads: the store (profiles, chains, keys, cooldowns), how to
    resolve a profile, the key clock (epoch seconds: cooldowns are stored), the environment
    for ``env`` credentials and where environment keys' cooldowns live (``memory``: pass the
    Tavern's ``key_cooldowns`` so they outlive the turn). ``shared``: the route a personal turn
    may fall back to (see the module docstring). ``rest_lone_keys``: a profile with one key
    gets a pool too, so that key rests after a rate limit (a personal profile's one key is
    tried whatever its state, since nothing else could answer; a shared route's is what its
    admission checks before it lets a user's turn through)."""

    store: Store
    owner: str
    resolve: Resolve
    key_clock: Callable[[], float]
    environ: Mapping[str, str]
    memory: CooldownStore = field(default_factory=InMemoryCooldownStore)
    shared: SharedRoute | None = None
    rest_lone_keys: bool = False


@dataclass(frozen=True)
class SharedRoute:
    """A route paid by someone else (a server) behind a user's own keys.

    ``sources`` are the payer's (its store owner: profiles, chain, keys, cooldowns);
    ``profile`` names the shared profile there (its fallback chain comes with it); ``scope``
    is the payer's funding scope; ``admission`` is asked before the route is resolved
    (``purpose="deferred_route"``) and before each of its attempts (``purpose="attempt"``).
    ``shown_as``: what notices and results call the route's models (``None``: their names;
    see :class:`~tavernkit.generation.plan.DeferredRoute`). ``max_tokens``: the payer's cap
    on the output tokens each of its requests asks for (``None``: none).
    """

    sources: PlanSources
    profile: str
    scope: FundingScope
    admission: Admission
    shown_as: str | None = None
    max_tokens: int | None = None


class TagSplittingProvider(ProviderWrapper):
    """``inner`` with inline reasoning split off its stream by ``template``'s delimiters."""

    def __init__(self, inner: ProviderLike, template: Delimiters) -> None:
        super().__init__(inner)
        self.template = template

    def _stream(
        self,
        request: PromptRequest,
        model: str | None,
        profile: ModelProfile | None,
        stream: bool,
        abort: AbortLike | None,
    ) -> AsyncIterator[StreamEvent]:
        events = self.inner.stream(
            request, model=model, profile=profile, stream=stream, abort=abort
        )
        return split_tag_reasoning(events, self.template)


def entry_source(profile: ConnectionProfile, credential: CredentialRef | None) -> str:
    """The credential source of an entry: one explicit credential, or the profile's own."""
    if credential is not None and credential.key_id:
        return f"key:{credential.key_id}"
    if credential is not None and credential.env:
        return f"env:{credential.env}"
    return f"profile:{profile.name}"


def _pool_key(ref: CredentialRef) -> PoolKey | None:
    if ref.key_id:
        return PoolKey(ref.key_id, label=ref.label or "")
    if ref.env:
        return PoolKey(f"env:{ref.env}", label=ref.label or ref.env)
    return None


def _splits(connection: ResolvedConnection, template: Delimiters | None, auto: bool) -> bool:
    """Whether this connection's stream is split by the tag splitter.

    SillyTavern's auto-parse reads the text stream of every model, whatever its reasoning
    format: any reply text may carry the block inline (a proxy or a local server in front of
    a model that thinks in tags). A model that sends its reasoning in a field does not start
    its text with the prefix, and the splitter then leaves the text alone. Without
    auto-parse, a profile whose capabilities say ``reasoning_format="tags"`` asks for it.
    """
    if template is None or not template.prefix or not template.suffix:
        return False
    return auto or connection.profile.capabilities.reasoning_format == "tags"


class _Builder:
    def __init__(
        self,
        sources: PlanSources,
        family: str,
        template: Delimiters | None,
        auto_parse: bool,
    ) -> None:
        self.sources = sources
        self.family = family
        self.template = template
        self.auto_parse = auto_parse

    def _wrap(self, provider: ProviderLike, connection: ResolvedConnection) -> Provider:
        if _splits(connection, self.template, self.auto_parse):
            assert self.template is not None
            provider = TagSplittingProvider(provider, self.template)
        # the embedded model and the splitter are not HTTP Providers but stream the same events
        return cast(Provider, provider)

    def _cooldowns(self, refs: list[CredentialRef]) -> CooldownStore:
        stored = StoreCooldownStore(self.sources.store)
        if all(ref.key_id for ref in refs):
            return stored
        if not any(ref.key_id for ref in refs):
            return self.sources.memory
        return SplitCooldownStore(stored, self.sources.memory)

    async def _secret(self, key: PoolKey) -> str:
        if key.key_id.startswith("env:"):
            name = key.key_id.removeprefix("env:")
            value = self.sources.environ.get(name)
            if not value:
                raise LookupError(f"environment variable {name} is not set")
            return value
        return await self.sources.store.get_api_key_secret(key.key_id, owner=self.sources.owner)

    def target(self, connection: ResolvedConnection) -> AttemptTarget:
        """How to reach ``connection``: one fixed provider, or one per key of its pool."""
        provider = connection.provider
        refs = [r for r in connection.profile.credentials if _pool_key(r) is not None]
        keys = [k for k in (_pool_key(r) for r in refs) if k is not None]
        pooled = len(keys) > 1 or (len(keys) == 1 and self.sources.rest_lone_keys)
        if isinstance(provider, Provider) and pooled:
            pool = KeyPool(
                self.sources.owner,
                connection.source,
                keys,
                load_secret=self._secret,
                store=self._cooldowns(refs),
                clock=self.sources.key_clock,
                # a key rests for the model that failed; it still serves the chain's others
                model=connection.model or connection.model_profile.model or "",
            )
            base = provider

            def per_key(secret: str | None) -> Provider:
                return self._wrap(replace(base, keys=secret), connection)

            return AttemptTarget(make_provider=per_key, profile=connection.model_profile, pool=pool)
        fixed = self._wrap(provider, connection)
        return AttemptTarget(make_provider=lambda _secret: fixed, profile=connection.model_profile)

    async def chain(self, primary: ConnectionProfile) -> FallbackChain | None:
        if not primary.fallback_chain:
            return None
        store, owner = self.sources.store, self.sources.owner
        chain = await _get(store, "fallback_chain", primary.fallback_chain, owner)
        return chain if isinstance(chain, FallbackChain) else None

    async def fallbacks(
        self, chain: FallbackChain | None
    ) -> list[tuple[PlanEntry, ConnectionProfile | None, str | None, CredentialRef | None]]:
        if chain is None:
            return []
        store, owner = self.sources.store, self.sources.owner
        out: list[tuple[PlanEntry, ConnectionProfile | None, str | None, CredentialRef | None]] = []
        for item in chain.entries:
            profile = await _get(store, "connection_profile", item.profile, owner)
            if not isinstance(profile, ConnectionProfile):
                entry = PlanEntry(
                    item.model or "", "?", f"profile:{item.profile}", label=item.profile
                )
                out.append((entry, None, item.model, item.credential))
                continue
            model = item.model or profile.model or ""
            entry = PlanEntry(
                model,
                profile.source,
                entry_source(profile, item.credential),
                label=f"{profile.name}/{model}" if model else profile.name,
            )
            out.append((entry, profile, item.model, item.credential))
        return out

    async def resolve_fallback(
        self, profile: ConnectionProfile | None, model: str | None, credential: CredentialRef | None
    ) -> AttemptTarget:
        if profile is None:
            raise Unusable("no such connection profile")
        if model:
            profile = profile.model_copy(update={"model": model})
        if credential is not None:
            profile = profile.model_copy(update={"credentials": [credential]})
        connection = await self.sources.resolve(profile)
        if connection.family != self.family:
            raise Unusable(f"a {connection.family} profile cannot take this {self.family} prompt")
        return self.target(connection)


async def _get(store: Store, kind: str, name: str, owner: str) -> Any:

    try:
        return await store.get(kind, name, owner=owner)
    except NotFound:
        return None


#: a pinned reviewer: its plan entry, the stored profile (``None``: not stored, so unusable)
#: and the model it is pinned to
PinnedReviewerSpec = tuple[PlanEntry, ConnectionProfile | None, str | None]


async def pinned_reviewer_spec(
    sources: PlanSources, profile_name: str, model: str | None = None
) -> PinnedReviewerSpec:
    """The plan entry of a reviewer pinned to ``profile_name`` (and ``model``); pass the spec
    to :func:`chat_plan` and its entry to the review settings. A profile that is not stored
    still gets an entry: resolving it fails, so review is unavailable and the reply goes out.
    """
    profile = await _get(sources.store, "connection_profile", profile_name, sources.owner)
    if not isinstance(profile, ConnectionProfile):
        entry = PlanEntry(model or "", "?", f"profile:{profile_name}", label=profile_name)
        return entry, None, model
    chosen = model or profile.model or ""
    label = f"{profile.name}/{chosen}" if chosen else profile.name
    return (
        PlanEntry(chosen, profile.source, entry_source(profile, None), label=label),
        profile,
        model,
    )


async def chat_plan(
    connection: ResolvedConnection,
    sources: PlanSources,
    *,
    kind: str,
    reasoning_template: Delimiters | None = None,
    auto_parse_reasoning: bool = False,
    seed: str | int | None = None,
    reviewer: PinnedReviewerSpec | None = None,
) -> Plan:
    """The plan of one chat turn on ``connection`` (see the module docstring). ``seed`` seeds
    the randomizer of a chain that has it on (``None``: an unseeded draw); ``reviewer`` makes
    a pinned reviewer resolvable by the plan."""
    builder = _Builder(sources, connection.family, reasoning_template, auto_parse_reasoning)
    primary = PlanEntry(
        connection.model or "",
        connection.source,
        entry_source(connection.profile, None),
        label=connection.profile.name,
    )
    specs: dict[PlanEntry, tuple[ConnectionProfile | None, str | None, CredentialRef | None]] = {}
    entries = [primary]
    chain = await builder.chain(connection.profile)
    for entry, profile, model, credential in await builder.fallbacks(chain):
        if entry.identity == primary.identity or entry in specs:
            continue  # the same model through the same credentials would fail the same way
        specs[entry] = (profile, model, credential)
        entries.append(entry)

    side = dict(specs)
    if reviewer is not None and reviewer[0] not in side and reviewer[0] != primary:
        side[reviewer[0]] = (reviewer[1], reviewer[2], None)

    shared = _SharedEntries(sources.shared, builder) if sources.shared is not None else None

    async def resolver(entry: PlanEntry, scope: FundingScope) -> AttemptTarget:
        if shared is not None and scope == shared.route.scope:
            return await shared.resolve(entry)
        if entry == primary:
            return builder.target(connection)
        return await builder.resolve_fallback(*side[entry])

    owner = sources.owner
    personal = FundingScope("user", owner)
    randomize = chain is not None and chain.randomize
    return Plan(
        entries,
        randomize=randomize,
        rng=random.Random(seed) if randomize and seed is not None else None,
        resolver=resolver,
        scope=personal,
        context=TurnContext(
            user_id=owner, impersonation=kind == "impersonate", quiet=kind == "quiet"
        ),
        deferred=shared.deferred() if shared is not None else None,
        admission=shared.admission(personal) if shared is not None else None,
    )


class _SharedEntries:
    """The entries of a shared route, read from its payer's sources only when the plan asks
    (after every personal attempt failed), and resolved with the payer's keys."""

    def __init__(self, route: SharedRoute, personal: _Builder) -> None:
        self.route = route
        self.builder = _Builder(
            route.sources, personal.family, personal.template, personal.auto_parse
        )
        self.specs: dict[
            PlanEntry, tuple[ConnectionProfile | None, str | None, CredentialRef | None]
        ] = {}

    def deferred(self) -> DeferredRoute:
        return DeferredRoute(
            scope=self.route.scope, entries=self.entries, shown_as=self.route.shown_as
        )

    def admission(self, personal: FundingScope) -> Admission:
        async def admit(request: AdmissionRequest) -> bool:
            if request.scope == personal:
                return True  # the user's own keys: the shared route's rules do not apply
            return await self.route.admission(request)

        return admit

    async def entries(self) -> list[PlanEntry]:
        sources = self.route.sources
        profile = await _get(sources.store, "connection_profile", self.route.profile, sources.owner)
        if not isinstance(profile, ConnectionProfile):
            return []
        model = profile.model or ""
        head = PlanEntry(
            model,
            profile.source,
            entry_source(profile, None),
            label=f"shared {profile.name}/{model}" if model else f"shared {profile.name}",
        )
        out = [head]
        self.specs[head] = (profile, None, None)
        for entry, fallback, fb_model, credential in await self.builder.fallbacks(
            await self.builder.chain(profile)
        ):
            if entry not in self.specs:
                self.specs[entry] = (fallback, fb_model, credential)
                out.append(entry)
        return out

    async def resolve(self, entry: PlanEntry) -> AttemptTarget:
        target = await self.builder.resolve_fallback(*self.specs[entry])
        if self.route.max_tokens is not None:
            target.max_tokens_cap = self.route.max_tokens
        return target


async def task_plan(connection: ResolvedConnection, sources: PlanSources) -> Plan:
    """The plan of a background call (``generate_task``, ``generate_raw``, a quiet prompt, the
    ``send_*`` primitives) on ``connection``: the chat turn's plan for a quiet generation, so
    the profile's key pool, its cooldowns and its fallback chain hold there too. Whether a
    cut reply may be continued is the caller's (a JSON document or a tool call cannot be
    stitched from two replies)."""
    return await chat_plan(connection, sources, kind="quiet")
