"""Plan ordering, chain editing, lazy materialization; key pools and cooldown stores."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tavernkit.errors import (
    AuthError,
    BadRequest,
    NetworkError,
    NotFound,
    Overloaded,
    ProtocolError,
    ProviderTimeout,
    QuotaExhausted,
    RateLimited,
    StreamInterrupted,
)
from tavernkit.generation.keys import (
    CooldownPolicy,
    InMemoryCooldownStore,
    KeyPool,
    PoolKey,
    StoreCooldownStore,
)
from tavernkit.generation.plan import (
    AttemptTarget,
    ChainSelections,
    EndpointRef,
    FundingScope,
    Plan,
    PlanEntry,
    TurnContext,
    Unusable,
    endpoint_usable,
)
from tavernkit.providers.profiles import FAMILY_DEFAULTS
from tavernkit.store import open_store

ALICE = FundingScope("user", "alice")


def entries(*models: str) -> list[PlanEntry]:
    return [PlanEntry(m, "openai") for m in models]


def resolver(log: list[str], unusable: frozenset[str] = frozenset()):
    async def resolve(entry: PlanEntry, scope: FundingScope) -> AttemptTarget:
        log.append(entry.model)
        if entry.model in unusable:
            raise Unusable("no saved key")
        return AttemptTarget(make_provider=lambda _s: None, profile=FAMILY_DEFAULTS["openai"])  # type: ignore[arg-type,return-value]

    return resolve


async def collect(plan: Plan) -> list[tuple[int, str, str]]:
    return [(a.index, a.entry.model, a.label) async for a in plan.attempts()]


async def test_attempts_are_materialized_lazily() -> None:
    log: list[str] = []
    plan = Plan(
        entries("a", "b", "c"), resolver=resolver(log), scope=ALICE, context=TurnContext("alice")
    )
    attempts = plan.attempts()
    first = await anext(attempts)
    assert first.label == "primary" and log == ["a"]
    second = await anext(attempts)
    assert second.label == "fallback 1: b" and second.is_fallback and log == ["a", "b"]
    assert plan.has_pending()


async def test_entries_without_credentials_are_skipped_with_a_reason() -> None:
    log: list[str] = []
    plan = Plan(
        entries("a", "b", "c"),
        resolver=resolver(log, frozenset({"b"})),
        scope=ALICE,
        context=TurnContext("alice"),
    )
    assert [m for _, m, _ in await collect(plan)] == ["a", "c"]
    assert [(s.entry.model, s.reason) for s in plan.skipped] == [("b", "no saved key")]


@pytest.mark.parametrize("seed", range(8))
async def test_randomizer_moves_one_member_to_the_front(seed: int) -> None:
    models = ["a", "b", "c", "d"]
    plan = Plan(
        entries(*models),
        resolver=resolver([]),
        scope=ALICE,
        context=TurnContext("alice"),
        randomize=True,
        rng=random.Random(seed),
    )
    order = [m for _, m, _ in await collect(plan)]
    lead = order[0]
    assert sorted(order) == models
    assert order[1:] == [m for m in models if m != lead]
    assert (
        await collect(
            Plan(entries(*models), resolver=resolver([]), scope=ALICE, context=TurnContext("alice"))
        )
    )[0][2] == "primary"


def test_same_model_with_two_credentials_is_two_entries() -> None:
    own = PlanEntry("gpt-4o", "openai", source="user:openai-1")
    other = PlanEntry("gpt-4o", "openai", source="user:openai-2")
    native = PlanEntry("gpt-4o", "openai")
    assert len({own.identity, other.identity, native.identity}) == 3
    assert native.effective_source == "native:openai"


def test_promoting_removes_only_the_same_model_and_source() -> None:
    own = PlanEntry("gpt-4o", "openai", source="p1")
    same_model_other_key = PlanEntry("gpt-4o", "openai", source="p2")
    other_model_same_key = PlanEntry("gpt-4.1", "openai", source="p1")
    chain = ChainSelections(
        PlanEntry("claude", "anthropic"), (own, same_model_other_key, other_model_same_key)
    )
    promoted = chain.promote(own)
    assert promoted.primary == own
    assert promoted.fallbacks == (same_model_other_key, other_model_same_key)


def test_removing_a_provider_clears_only_what_it_owned() -> None:
    mine = PlanEntry("gpt-4o", "openai", source="p1")
    theirs = PlanEntry("gpt-4o", "openai", source="p2")
    chain = ChainSelections(mine, (theirs, PlanEntry("gpt-4.1", "openai", source="p1")), mine)
    after = chain.remove_source("p1")
    assert after.primary is None and after.reviewer is None and after.fallbacks == (theirs,)
    assert chain.remove_source("p2").primary == mine


def test_endpoint_ownership_rules() -> None:
    alice = FundingScope("user", "alice")
    guild = FundingScope("server", "g1")
    assert endpoint_usable(EndpointRef("e", owner_user="alice"), alice)
    assert not endpoint_usable(EndpointRef("e", owner_user="alice"), guild)
    assert not endpoint_usable(EndpointRef("e", owner_user="bob"), alice)
    assert endpoint_usable(EndpointRef("e", owner_server="g1"), guild)
    assert not endpoint_usable(EndpointRef("e", owner_server="g1"), alice)
    # both owners set is neither a personal nor a server endpoint
    assert not endpoint_usable(EndpointRef("e", owner_user="alice", owner_server="g1"), alice)
    assert not endpoint_usable(EndpointRef("e", owner_user="alice", owner_server="g1"), guild)


async def test_admission_runs_per_attempt_model_and_scope() -> None:
    asked: list[tuple[str, str, str]] = []

    async def admit(req) -> bool:
        asked.append((req.model, req.scope.label(), req.purpose))
        return req.model != "b"

    plan = Plan(
        entries("a", "b", "c"),
        resolver=resolver([]),
        scope=ALICE,
        context=TurnContext("alice"),
        admission=admit,
    )
    assert [m for _, m, _ in await collect(plan)] == ["a", "c"]
    assert asked == [
        ("a", "user:alice", "attempt"),
        ("b", "user:alice", "attempt"),
        ("c", "user:alice", "attempt"),
    ]
    assert plan.skipped[0].reason == "admission refused"


# -- keys -------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def pool(clock: Clock, n: int = 3, store=None) -> KeyPool:
    async def load(key: PoolKey) -> str:
        return f"secret-{key.key_id}"

    return KeyPool(
        "alice",
        "OpenAI",
        [PoolKey(f"k{i}") for i in range(n)],
        load_secret=load,
        store=store or InMemoryCooldownStore(),
        clock=clock,
    )


async def test_least_used_first_and_success_clears_errors() -> None:
    clock = Clock()
    p = pool(clock)
    first = await p.select()
    assert first is not None and first.key_id == "k0"
    await p.record_success(first)
    assert (await p.select()).key_id == "k1"  # type: ignore[union-attr]
    await p.record_failure(first, Overloaded("down"))
    await p.record_success(first)
    status = await p.store.get("alice", "openai", "k0")
    assert status.cooldown_until is None and status.failures == 0 and status.uses == 2


async def test_cooldowns_by_error_class() -> None:
    clock = Clock()
    p = pool(clock, 5)
    k0, k1, k2, k3, k4 = p.keys
    assert await p.record_failure(k0, RateLimited("slow")) == 60
    assert await p.record_failure(k1, AuthError("revoked", status=401)) == 300
    # the brief's turn rests a key after any error another key may fix: capacity and
    # transport failures rest it 300 s too (or the server's Retry-After, when longer)
    for error in (
        Overloaded("down", status=529),
        NetworkError("reset"),
        ProtocolError("garbage"),
        StreamInterrupted("cut", cause=Overloaded("down")),
    ):
        assert await p.record_failure(k2, error) == 300
    assert await p.record_failure(k3, Overloaded("busy", status=503, retry_after=900)) == 900
    # a timeout is the model's slowness, a bad request the prompt's: no rest
    assert await p.record_failure(k4, ProviderTimeout("slow", phase="idle")) is None
    assert await p.record_failure(k4, BadRequest("no such field", status=400)) is None
    assert (await p.select()).key_id == "k4"  # type: ignore[union-attr]
    assert await p.select({"k4"}) is None
    assert await p.next_ready_in() == 60
    clock.now += 61
    assert (await p.select({"k4"})).key_id == "k0"  # type: ignore[union-attr]
    clock.now += 240  # 301 s: every 300 s rest is over, the 900 s one is not
    assert await p.available({"k0", "k1", "k2", "k4"}) is False
    assert (await p.select({"k0", "k1", "k4"})).key_id == "k2"  # type: ignore[union-attr]


def model_pools(clock: Clock, store: InMemoryCooldownStore) -> tuple[KeyPool, KeyPool]:
    async def load(key: PoolKey) -> str:
        return "s"

    keys = [PoolKey("k0"), PoolKey("k1")]
    return tuple(  # type: ignore[return-value]
        KeyPool("alice", "openai", keys, load_secret=load, store=store, clock=clock, model=m)
        for m in ("model-a", "model-b")
    )


async def test_a_key_rests_for_the_model_that_failed_only() -> None:
    clock = Clock()
    store = InMemoryCooldownStore()
    a, b = model_pools(clock, store)
    k0 = a.keys[0]
    assert await a.record_failure(k0, Overloaded("down", status=500)) == 300
    assert (await a.select()).key_id == "k1"  # type: ignore[union-attr]
    # resting for model A, k0 still serves model B (first: both are unused)
    assert (await b.select()).key_id == "k0"  # type: ignore[union-attr]
    assert await b.next_ready_in() is None and await a.next_ready_in() == 300


async def test_uses_are_the_keys_own_and_success_clears_only_its_models_rest() -> None:
    clock = Clock()
    store = InMemoryCooldownStore()
    a, b = model_pools(clock, store)
    k0, k1 = a.keys
    await b.record_failure(k0, RateLimited("slow"))
    await a.record_success(k0)
    # the success on model A counts for the key whatever the model: B now picks k1 first
    assert (await b.select()).key_id == "k1"  # type: ignore[union-attr]
    assert (await a.select()).key_id == "k1"  # type: ignore[union-attr]
    # ... and leaves its rest for model B as it was
    assert (await b.rest("k0")).cooling(clock.now) and await b.select({"k1"}) is None
    await b.record_success(k1)
    await b.record_failure(k1, Overloaded("down", status=503))
    assert (await b.uses("k1")).uses == 1  # a failure credits nothing and takes nothing back
    clock.now += 61
    await b.record_success(k0)
    assert not (await b.rest("k0")).cooling(clock.now) and (await b.rest("k0")).failures == 0


async def test_quota_cooldown_escalates_on_repeats() -> None:
    clock = Clock()
    p = pool(clock, 1)
    key = p.keys[0]
    steps = []
    for _ in range(5):
        steps.append(await p.record_failure(key, QuotaExhausted("out of credit")))
    assert steps == [300, 3600, 21600, 86400, 86400]
    assert CooldownPolicy(rate_limit_s=10).cooldown("rate_limit", 1, 3.5) == 10


async def test_disabled_keys_are_never_selected() -> None:
    async def load(key: PoolKey) -> str:
        return "s"

    p = KeyPool(
        "alice",
        "openai",
        [PoolKey("off", enabled=False), PoolKey("on")],
        load_secret=load,
        clock=Clock(),
    )
    assert (await p.select()).key_id == "on"  # type: ignore[union-attr]


async def test_store_cooldown_store_persists_key_state(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "t.db")
    try:
        ids = [await store.add_api_key("openai", f"sk-test-{i}", owner="alice") for i in range(2)]

        async def load(key: PoolKey) -> str:
            return await store.get_api_key_secret(key.key_id, owner="alice")

        clock = Clock()
        p = KeyPool(
            "alice",
            "openai",
            [PoolKey(i) for i in ids],
            load_secret=load,
            store=StoreCooldownStore(store),
            clock=clock,
        )
        first = await p.select()
        assert first is not None and await p.secret(first) == "sk-test-0"
        await p.record_failure(first, RateLimited("slow", retry_after=90))
        state = await store.get_key_state(first.key_id, owner="alice")
        assert state.last_error_code == "rate_limit" and state.failures == 1
        assert state.cooldown_until is not None
        assert state.cooldown_until.timestamp() == pytest.approx(clock.now + 90)
        # a second pool over the same store sees the cooldown
        again = KeyPool(
            "alice",
            "openai",
            [PoolKey(i) for i in ids],
            load_secret=load,
            store=StoreCooldownStore(store),
            clock=clock,
        )
        assert (await again.select()).key_id == ids[1]  # type: ignore[union-attr]
        await again.record_success(first)
        assert (await store.get_key_state(first.key_id, owner="alice")).cooldown_until is None
        # unknown keys read as fresh
        assert (await StoreCooldownStore(store).get("alice", "openai", "nope")).failures == 0
        # a rest for one model is a row of its own (key_rests): the key's uses stay one row
        on_a = KeyPool(
            "alice",
            "openai",
            [PoolKey(i) for i in ids],
            load_secret=load,
            store=StoreCooldownStore(store),
            clock=clock,
            model="model-a",
        )
        assert await on_a.record_failure(first, Overloaded("down", status=500)) == 300
        rest = await store.get_key_state(first.key_id, owner="alice", model="model-a")
        assert rest.model == "model-a" and rest.last_error_code == "overloaded"
        assert (await store.get_key_state(first.key_id, owner="alice")).cooldown_until is None
        assert (await on_a.select()).key_id == ids[1]  # type: ignore[union-attr]
        assert (await again.select()).key_id == ids[1]  # uses: first 1, second 0
        await store.delete_api_key(first.key_id, owner="alice")
        with pytest.raises(NotFound):
            await store.get_key_state(first.key_id, owner="alice", model="model-a")
    finally:
        await store.close()
