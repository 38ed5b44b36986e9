"""Key pools: which API key an attempt uses, and how long a failing key rests.

One pool per ``(owner, provider)``, credential source and model. Selection is least-used first
(ties: least recently used, then the configured order) among the keys that are not resting.

As the brief's turn (003, ``keyRotation.ts``) does, a key that fails with an error another key
may fix rests for that error class's cooldown: a rate limit 60 s, exhausted quota escalating
on repeats (5 min, 1 h, 6 h, 24 h: a free tier's daily quota does not come back in a minute),
every other error 300 s (401/403, 5xx, 529, a cut or malformed stream, an in-stream error, an
unknown error) -- or the provider's ``Retry-After`` (seconds or an HTTP date) when longer.
The rest is for the model that failed: a key resting for model A still serves model B (a
fallback to another model on the same keys still runs), while its use count is the key's own,
so least-used-first spreads calls over the keys whatever the model. Only a clean completion
credits a key (its use count, and it clears the model's rest). Timeouts are neither: they
never rotate keys, rest nothing and are never credited (the key may be fine; the model was
slow). A request the prompt made bad (400, context too long, a content filter) or an empty
reply says nothing about the key and rests nothing either.

A pool holds keys of one credential source. A user's own key (BYOK) is never silently
replaced by a server or sponsored key: those only come through a server attempt, which is its
own plan entry with its own scope.

Rest state lives behind :class:`CooldownStore` (one record per key, plus one per key and
model for its rests there), so that a single process keeps it in memory (a Tavern holds one
:class:`InMemoryCooldownStore` for every turn and task, so an environment key's rest outlives
the turn), the embedded store persists it for stored keys (:class:`StoreCooldownStore`, over
the store's key-state calls, so it also outlives the process), :class:`SplitCooldownStore`
routes a mixed pool's keys to each, and the server shares it through Redis.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Literal, Protocol

from tavernkit.errors import NotFound, ProviderError
from tavernkit.generation.result import ErrorClass, classify_error, root_cause
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.store.key_types import KeyState
from tavernkit.store.protocol import Store

__all__ = [
    "DEFAULT_MAX_KEY_ATTEMPTS",
    "CooldownPolicy",
    "CooldownStore",
    "CredentialSource",
    "InMemoryCooldownStore",
    "KeyPool",
    "KeyStatus",
    "PoolKey",
    "SplitCooldownStore",
    "StoreCooldownStore",
    "cools_key",
    "rests_key",
    "rotates_key",
]

DEFAULT_MAX_KEY_ATTEMPTS = 3

CredentialSource = Literal["user", "server", "sponsored"]

#: errors another key of the same provider may fix; the rest go straight to model fallback
_ROTATING: frozenset[ErrorClass] = frozenset(
    {
        "auth",
        "missing_credential",
        "quota",
        "rate_limit",
        "overloaded",
        "network",
        "interrupted",
        "protocol",
        "unknown",
        "no_credentials",
    }
)


def rotates_key(error_class: ErrorClass) -> bool:
    """Whether trying another key of the same model may help (never for timeouts)."""
    return error_class in _ROTATING


def rests_key(error_class: str) -> bool:
    """Whether ``error_class`` rests the key for the model: every error another key may fix
    (the brief's turn rests a key after any such error); never a timeout, a bad request or
    an empty reply."""
    return error_class in _ROTATING


#: the name earlier versions exported
cools_key = rests_key


@dataclass(frozen=True, slots=True)
class KeyStatus:
    """Bookkeeping for one key (no secret). Times are seconds on the injected clock."""

    key_id: str
    uses: int = 0
    failures: int = 0
    error_class: str | None = None
    cooldown_until: float | None = None
    last_used: float | None = None

    def cooling(self, now: float) -> bool:
        return self.cooldown_until is not None and self.cooldown_until > now


class CooldownStore(Protocol):
    """Key records by ``(owner, provider, key id, model)``. ``model=""`` is the key's own
    record (its uses; a pool without a model keeps its rests there too); a model's record
    holds the key's rest for that model."""

    async def get(self, owner: str, provider: str, key_id: str, model: str = "") -> KeyStatus: ...

    async def put(self, owner: str, provider: str, status: KeyStatus, model: str = "") -> None: ...


class InMemoryCooldownStore:
    """Cooldowns for one process (what tests and the CLI use)."""

    def __init__(self) -> None:
        self._state: dict[tuple[str, str, str, str], KeyStatus] = {}

    async def get(self, owner: str, provider: str, key_id: str, model: str = "") -> KeyStatus:
        return self._state.get((owner, provider, key_id, model)) or KeyStatus(key_id)

    async def put(self, owner: str, provider: str, status: KeyStatus, model: str = "") -> None:
        self._state[(owner, provider, status.key_id, model)] = status


def _to_dt(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def _to_s(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


class StoreCooldownStore:
    """Cooldowns persisted through the Store's key-state calls (key ids are store ids).

    The use counter is persisted too (``KeyState.uses``), so least-used-first holds across
    processes: a CLI that starts fresh for every message still spreads its calls over the keys.
    The clock passed to :class:`KeyPool` must be epoch seconds for the stored times to mean
    anything.
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    async def get(self, owner: str, provider: str, key_id: str, model: str = "") -> KeyStatus:
        try:
            state = await self.store.get_key_state(key_id, owner=owner, model=model)
        except NotFound:
            return KeyStatus(key_id)
        return KeyStatus(
            key_id,
            uses=state.uses,
            failures=state.failures,
            error_class=state.last_error_code,
            cooldown_until=_to_s(state.cooldown_until),
            last_used=_to_s(state.last_used),
        )

    async def put(self, owner: str, provider: str, status: KeyStatus, model: str = "") -> None:
        await self.store.put_key_state(
            KeyState(
                key_id=status.key_id,
                model=model,
                cooldown_until=_to_dt(status.cooldown_until),
                failures=status.failures,
                last_error_code=status.error_class,
                last_used=_to_dt(status.last_used),
                uses=status.uses,
            ),
            owner=owner,
        )


class SplitCooldownStore:
    """Environment-variable keys (ids ``env:NAME``) in ``memory``, stored keys in ``stored``.

    The store's key-state rows belong to stored keys (a foreign key on the key table), so an
    environment key's cooldown cannot live there; ``memory`` is the Tavern's, so it still
    outlives the turn. A pool that mixes both kinds keeps each where it can live.
    """

    def __init__(self, stored: CooldownStore, memory: CooldownStore) -> None:
        self.stored = stored
        self.memory = memory

    def _for(self, key_id: str) -> CooldownStore:
        return self.memory if key_id.startswith("env:") else self.stored

    async def get(self, owner: str, provider: str, key_id: str, model: str = "") -> KeyStatus:
        return await self._for(key_id).get(owner, provider, key_id, model)

    async def put(self, owner: str, provider: str, status: KeyStatus, model: str = "") -> None:
        await self._for(status.key_id).put(owner, provider, status, model)


@dataclass(frozen=True, slots=True)
class CooldownPolicy:
    rate_limit_s: float = 60.0
    other_s: float = 300.0
    #: consecutive quota failures 1, 2, 3, 4+ rest this long
    quota_steps_s: tuple[float, ...] = (300.0, 3600.0, 21600.0, 86400.0)
    #: a Retry-After longer than this is capped (a broken header must not bench a key for days)
    max_retry_after_s: float = 86400.0

    def cooldown(self, error_class: str, failures: int, retry_after: float | None) -> float:
        if error_class == "rate_limit":
            base = self.rate_limit_s
        elif error_class == "quota":
            base = self.quota_steps_s[min(failures, len(self.quota_steps_s)) - 1]
        else:
            base = self.other_s
        if retry_after is not None and math.isfinite(retry_after):
            base = max(base, min(retry_after, self.max_retry_after_s))
        return base


@dataclass(frozen=True, slots=True)
class PoolKey:
    """A key the pool may hand out; the secret is loaded only when the key is used."""

    key_id: str
    source: CredentialSource = "user"
    enabled: bool = True
    label: str = ""


SecretLoader = Callable[[PoolKey], Awaitable[str]]


class KeyPool:
    """The keys of one ``(owner, provider)`` for one credential source, resting per ``model``
    (``""``: one rest for every model, kept in the key's own record)."""

    def __init__(
        self,
        owner: str,
        provider: str,
        keys: Sequence[PoolKey],
        *,
        source: CredentialSource = "user",
        load_secret: SecretLoader,
        store: CooldownStore | None = None,
        clock: Callable[[], float],
        policy: CooldownPolicy | None = None,
        model: str = "",
    ) -> None:
        foreign = [k.key_id for k in keys if k.source != source]
        if foreign:
            # mixing sources would let a server key stand in for a user's own key unseen
            raise ValueError(f"keys {foreign} are not {source!r} credentials")
        self.owner = owner or DEFAULT_OWNER
        self.provider = provider.lower()
        self.keys = tuple(keys)
        self.source: CredentialSource = source
        self.model = model
        self._load_secret = load_secret
        self.store: CooldownStore = store or InMemoryCooldownStore()
        self.clock = clock
        self.policy = policy or CooldownPolicy()

    async def uses(self, key_id: str) -> KeyStatus:
        """The key's own record: its uses and last use, whatever the model."""
        return await self.store.get(self.owner, self.provider, key_id)

    async def rest(self, key_id: str) -> KeyStatus:
        """The key's rest for this pool's model."""
        return await self.store.get(self.owner, self.provider, key_id, self.model)

    async def _statuses(self) -> list[tuple[int, PoolKey, KeyStatus, KeyStatus]]:
        out = []
        for position, key in enumerate(self.keys):
            used = await self.uses(key.key_id)
            rest = await self.rest(key.key_id) if self.model else used
            out.append((position, key, used, rest))
        return out

    async def _candidates(self, exclude: frozenset[str] | set[str]) -> list[PoolKey]:
        now = self.clock()
        ready = [
            (used.uses, used.last_used or -math.inf, position, key)
            for position, key, used, rest in await self._statuses()
            if key.enabled and key.key_id not in exclude and not rest.cooling(now)
        ]
        ready.sort(key=lambda row: row[:3])
        return [row[3] for row in ready]

    async def select(self, exclude: frozenset[str] | set[str] = frozenset()) -> PoolKey | None:
        """The least-used usable key not in ``exclude``, or ``None`` when all are resting."""
        candidates = await self._candidates(exclude)
        return candidates[0] if candidates else None

    async def available(self, exclude: frozenset[str] | set[str] = frozenset()) -> bool:
        return bool(await self._candidates(exclude))

    async def secret(self, key: PoolKey) -> str:
        return await self._load_secret(key)

    async def next_ready_in(self) -> float | None:
        """Seconds until the first resting key comes back (``None``: none is resting)."""
        now = self.clock()
        waits = [
            rest.cooldown_until - now
            for _, key, _, rest in await self._statuses()
            if key.enabled and rest.cooldown_until is not None and rest.cooldown_until > now
        ]
        return min(waits) if waits else None

    async def record_success(self, key: PoolKey) -> None:
        """Credit ``key`` with a clean completion: one more use, and no rest for the model."""
        now = self.clock()
        used = await self.uses(key.key_id)
        cleared = replace(used, failures=0, error_class=None, cooldown_until=None)
        await self.store.put(
            self.owner, self.provider, replace(cleared, uses=used.uses + 1, last_used=now)
        )
        if self.model:
            rest = await self.rest(key.key_id)
            if rest.failures or rest.error_class or rest.cooldown_until is not None:
                await self.store.put(
                    self.owner,
                    self.provider,
                    replace(rest, failures=0, error_class=None, cooldown_until=None),
                    self.model,
                )

    async def record_failure(self, key: PoolKey, error: BaseException) -> float | None:
        """Rest ``key`` for this model after ``error``; returns the rest in seconds (``None``:
        none, because the error is a timeout or says nothing about the key)."""
        error_class, _ = classify_error(error)
        if not rests_key(error_class):
            return None
        status = await self.rest(key.key_id)
        repeats = status.failures + 1 if status.error_class == error_class else 1
        cause = root_cause(error)
        retry_after = cause.retry_after if isinstance(cause, ProviderError) else None
        seconds = self.policy.cooldown(error_class, repeats, retry_after)
        now = self.clock()
        rested = replace(
            status,
            failures=repeats,
            error_class=error_class,
            cooldown_until=now + seconds,
            last_used=now,
        )
        await self.store.put(self.owner, self.provider, rested, self.model)
        return seconds
