"""The plan of a turn: which models, through which credentials, in which order.

A plan is the primary entry plus an ordered fallback chain. An entry is the pair
``(model, credential source)``: the same model behind two saved providers is two entries, and a
custom endpoint is an entry of its own. An entry without an explicit source uses the model's
native provider credentials (``native:<provider>``).

- **Randomizer**: moves one random member to the front and keeps the rest in order (nothing is
  dropped or duplicated). The lead is attempt 0, so when it answers no fallback notice is due.
- **Lazy materialization**: an entry becomes an :class:`Attempt` only when the previous one
  failed; resolving it may load a key, which a turn that succeeds first never pays for. An
  entry that cannot be used (no credentials, a custom endpoint of another owner, admission
  refused) is skipped with a logged reason.
- **Ownership before keys**: a custom endpoint is usable only by its owner (user-owned: that
  user and no server; server-owned: that server and no user). The check runs before the
  resolver is asked for anything, so no key is ever loaded for a foreign endpoint, whatever
  the loader would have done.
- **Admission** runs for every attempt (model x funding scope), and for side calls (review,
  probes) through :meth:`Plan.admit`.
- **Deferred extra route** (a server-paid route behind a user's own keys): resolved only after
  every planned attempt failed, never for impersonation, never when the user opted out, only
  inside the same funding scope, and only when admission allows it. Its attempts continue the
  index count and are paid by the route's scope.
"""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack

from tavernkit.errors import Unusable as Unusable
from tavernkit.generation.blocks import Fitter
from tavernkit.generation.result import AttemptRecord
from tavernkit.providers.profiles import ModelProfile
from tavernkit.providers.provider import Provider

if TYPE_CHECKING:
    from tavernkit.generation.keys import KeyPool

__all__ = [
    "Admission",
    "AdmissionRequest",
    "Attempt",
    "AttemptTarget",
    "ChainSelections",
    "DeferredRoute",
    "EndpointRef",
    "EntryResolver",
    "FundingScope",
    "Plan",
    "PlanEntry",
    "PlanPolicy",
    "SkipRecord",
    "TurnContext",
    "Unusable",
    "endpoint_usable",
]

log = logging.getLogger("tavernkit.generation.plan")


@dataclass(frozen=True, slots=True)
class FundingScope:
    """Whose money an attempt spends: a user (their own keys or subscription) or a server."""

    payer: Literal["user", "server"]
    payer_id: str
    #: the workspace (server, DM) the money belongs to, when it matters
    workspace: str | None = None
    #: ``byok`` (own keys), ``subscription`` (a paid plan), ``server`` (the server's keys)
    kind: Literal["byok", "subscription", "server"] = "byok"

    def label(self) -> str:
        return f"{self.payer}:{self.payer_id}"


@dataclass(frozen=True, slots=True)
class EndpointRef:
    """A custom endpoint in a chain, with both owner fields (exactly one should be set)."""

    endpoint_id: str
    owner_user: str | None = None
    owner_server: str | None = None


def endpoint_usable(endpoint: EndpointRef, scope: FundingScope) -> bool:
    """Whether ``scope`` may use ``endpoint``: its owner, and only its owner."""
    if scope.payer == "user":
        return endpoint.owner_user == scope.payer_id and endpoint.owner_server is None
    return endpoint.owner_server == scope.payer_id and endpoint.owner_user is None


@dataclass(frozen=True, slots=True)
class PlanEntry:
    model: str
    provider: str
    #: the saved provider entry whose credentials pay (``None``: the native provider's)
    source: str | None = None
    endpoint: EndpointRef | None = None
    label: str = ""

    @property
    def effective_source(self) -> str:
        if self.endpoint is not None:
            return f"endpoint:{self.endpoint.endpoint_id}"
        return self.source or f"native:{self.provider}"

    @property
    def identity(self) -> tuple[str, str]:
        return self.model, self.effective_source


@dataclass(frozen=True, slots=True)
class ChainSelections:
    """A user's saved choices: primary, fallback chain, pinned reviewer.

    The editing rules keep entries that merely share a model or a transport: promoting an
    entry removes only fallbacks with the same model *and* credential source; removing a
    provider clears only the selections that entry owned.
    """

    primary: PlanEntry | None = None
    fallbacks: tuple[PlanEntry, ...] = ()
    reviewer: PlanEntry | None = None

    def promote(self, entry: PlanEntry) -> ChainSelections:
        kept = tuple(f for f in self.fallbacks if f.identity != entry.identity)
        return replace(self, primary=entry, fallbacks=kept)

    def remove_source(self, source: str) -> ChainSelections:
        def owned(e: PlanEntry | None) -> bool:
            return e is not None and e.effective_source == source

        return ChainSelections(
            primary=None if owned(self.primary) else self.primary,
            fallbacks=tuple(f for f in self.fallbacks if not owned(f)),
            reviewer=None if owned(self.reviewer) else self.reviewer,
        )

    def entries(self) -> list[PlanEntry]:
        return ([self.primary] if self.primary else []) + list(self.fallbacks)


@dataclass(frozen=True, slots=True)
class TurnContext:
    """Facts about the turn that decide which routes are allowed."""

    user_id: str
    workspace: str | None = None
    private: bool = False
    impersonation: bool = False
    quiet: bool = False


@dataclass
class AttemptTarget:
    """What the resolver makes of an entry: how to reach it and with which keys.

    ``make_provider(secret)`` builds the provider for one key (``None``: keyless or a fixed
    key); ``pool`` is ``None`` when the entry has no rotating keys. ``samplers`` are the
    provider's saved sampler settings (``Sampling`` field names); ``user_max_tokens`` an
    explicit per-user output limit; ``max_tokens_cap`` the payer's cap (a server's on what its
    shared route spends): every request asks for at most that many output tokens, and for
    that many when nothing set a limit; ``fitter`` an adapter's own context fitting (NovelAI).
    """

    make_provider: Callable[[str | None], Provider]
    profile: ModelProfile
    pool: KeyPool | None = None
    tools_enabled: bool = True
    samplers: Mapping[str, Any] = field(default_factory=dict)
    user_max_tokens: int | None = None
    max_tokens_cap: int | None = None
    fitter: Fitter | None = None


EntryResolver = Callable[["PlanEntry", FundingScope], Awaitable[AttemptTarget]]


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    model: str
    scope: FundingScope
    purpose: Literal["attempt", "deferred_route", "review", "probe"]
    entry: PlanEntry | None = None


Admission = Callable[[AdmissionRequest], Awaitable[bool]]


@dataclass(frozen=True, slots=True)
class DeferredRoute:
    """A route resolved only when every planned attempt failed (``entries`` is a lazy thunk,
    so a successful turn never reserves quota or touches the database for it).

    ``shown_as``: what the turn's notice, error and result call the route's models (``None``:
    their own names). A payer who keeps its models and providers to itself (a server's shared
    connection) names the route instead; the attempts log (the operator's) keeps the models.
    """

    scope: FundingScope
    entries: Callable[[], Awaitable[Sequence[PlanEntry]]]
    shown_as: str | None = None


@dataclass(frozen=True, slots=True)
class Attempt:
    index: int
    label: str
    entry: PlanEntry
    scope: FundingScope
    target: AttemptTarget
    deferred: bool = False

    @property
    def is_fallback(self) -> bool:
        return self.index > 0


@dataclass(frozen=True, slots=True)
class SkipRecord:
    index: int
    entry: PlanEntry
    scope: FundingScope
    reason: str

    def record(self) -> AttemptRecord:
        """The attempts-log line of a skipped entry."""
        return AttemptRecord(
            index=self.index,
            label="skipped",
            model=self.entry.model,
            provider=self.entry.provider,
            source=self.entry.effective_source,
            paid_by=self.scope.label(),
            outcome="skipped",
            reason=self.reason,
        )


class PlanPolicy(TypedDict, total=False):
    """How a :class:`Plan` orders and guards its attempts (see the module docstring):
    ``randomize`` moves a member drawn with ``rng`` to the front; ``deferred`` is the extra
    route tried after every planned attempt failed (unless ``deferred_opt_out``);
    ``admission`` is asked before each attempt; ``max_key_attempts`` caps the keys one entry
    tries."""

    randomize: bool
    rng: random.Random | None
    deferred: DeferredRoute | None
    deferred_opt_out: bool
    admission: Admission | None
    max_key_attempts: int


class Plan:
    """An ordered, lazily materialized list of attempts (see the module docstring)."""

    def __init__(
        self,
        entries: Sequence[PlanEntry],
        *,
        resolver: EntryResolver,
        scope: FundingScope,
        context: TurnContext,
        **policy: Unpack[PlanPolicy],
    ) -> None:
        unknown = sorted(set(policy) - set(PlanPolicy.__annotations__))
        if unknown:
            raise TypeError(f"Plan() got an unexpected keyword argument {unknown[0]!r}")
        ordered = list(entries)
        if policy.get("randomize", False) and len(ordered) > 1:
            lead = (policy.get("rng") or random.Random()).randrange(len(ordered))
            ordered.insert(0, ordered.pop(lead))
        self.entries: tuple[PlanEntry, ...] = tuple(ordered)
        self.resolver = resolver
        self.scope = scope
        self.context = context
        self.deferred = policy.get("deferred")
        self.deferred_opt_out = policy.get("deferred_opt_out", False)
        self.admission = policy.get("admission")
        self.max_key_attempts = policy.get("max_key_attempts", 3)
        self.skipped: list[SkipRecord] = []
        self._next = 0
        self._deferred_state: Literal["pending", "used", "refused"] = "pending"
        self._queue: list[tuple[PlanEntry, FundingScope, bool]] = []

    # -- policy ------------------------------------------------------------------------------

    async def admit(
        self,
        model: str,
        scope: FundingScope,
        purpose: Literal["attempt", "deferred_route", "review", "probe"],
        entry: PlanEntry | None = None,
    ) -> bool:
        if self.admission is None:
            return True
        return await self.admission(AdmissionRequest(model, scope, purpose, entry))

    def _deferred_refusal(self) -> str | None:
        """Why the deferred route may not be used, before asking admission."""
        route = self.deferred
        if route is None:
            return "no deferred route"
        if self.context.impersonation:
            return "impersonation"
        if self.deferred_opt_out:
            return "user opted out"
        if self.context.private:
            # a private chat's money stays in that chat's scope
            if self.scope.kind == "subscription":
                return "funding scope: subscription in a private chat"
            if route.scope.workspace != self.context.workspace:
                return "funding scope: another workspace"
        return None

    def _shown_as(self, attempt: Attempt) -> str | None:
        route = self.deferred
        return route.shown_as if attempt.deferred and route is not None else None

    def hides(self, attempt: Attempt) -> bool:
        """Whether ``attempt`` is one of a deferred route that hides its models."""
        return bool(self._shown_as(attempt))

    def shown_model(self, attempt: Attempt) -> str:
        """The model name a user is shown for ``attempt`` (see :class:`DeferredRoute`)."""
        return self._shown_as(attempt) or attempt.entry.model

    def has_pending(self) -> bool:
        """Whether another attempt may still come (for error suppression)."""
        if self._queue or self._next < len(self.entries):
            return True
        return self._deferred_state == "pending" and self._deferred_refusal() is None

    # -- materialization ---------------------------------------------------------------------

    def _skip(self, index: int, entry: PlanEntry, scope: FundingScope, reason: str) -> None:
        self.skipped.append(SkipRecord(index, entry, scope, reason))
        log.info("plan: skipped attempt %d (%s): %s", index, entry.model, reason)

    async def _take_deferred(self) -> None:
        self._deferred_state = "refused"
        reason = self._deferred_refusal()
        route = self.deferred
        if reason is not None or route is None:
            log.info("plan: deferred route withheld: %s", reason)
            return
        if not await self.admit("*", route.scope, "deferred_route"):
            log.info("plan: deferred route refused by admission")
            return
        self._deferred_state = "used"
        self._queue.extend((entry, route.scope, True) for entry in await route.entries())

    async def attempts(self) -> AsyncIterator[Attempt]:
        """The attempts, materialized one at a time as the previous one fails."""
        index = 0
        while True:
            if self._next < len(self.entries):
                entry, scope, deferred = self.entries[self._next], self.scope, False
                self._next += 1
            elif self._queue:
                entry, scope, deferred = self._queue.pop(0)
            elif self._deferred_state == "pending":
                await self._take_deferred()
                continue
            else:
                return
            this = index
            index += 1
            if entry.endpoint is not None and not endpoint_usable(entry.endpoint, scope):
                self._skip(this, entry, scope, "endpoint not owned by this scope")
                continue
            if not await self.admit(entry.model, scope, "attempt", entry):
                self._skip(this, entry, scope, "admission refused")
                continue
            try:
                target = await self.resolver(entry, scope)
            except Unusable as exc:
                self._skip(this, entry, scope, exc.reason)
                continue
            label = "primary" if this == 0 else f"fallback {this}: {entry.label or entry.model}"
            if deferred:
                label = f"deferred {this}: {entry.label or entry.model}"
            yield Attempt(this, label, entry, scope, target, deferred)
