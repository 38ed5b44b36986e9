"""Brief 003's fallback randomizer on chat turns: a chain with ``randomize`` on promotes one
pool member to lead each turn (the rest keep their order), seeded per turn."""

from __future__ import annotations

from tavernkit.chat.plan import chat_plan
from tavernkit.chat.prepare import resolve_profile
from tavernkit.generation.plan import Plan
from tavernkit.models.profile import ConnectionProfile

from ._server import Reply
from .conftest import World, use_profile


async def _pool(world: World) -> None:
    base = world.server.base_url + "/v1"
    for name, model in (("second", "m2"), ("third", "m3")):
        await world.tk.store.put(
            "connection_profile", ConnectionProfile(name=name, base_url=base, model=model)
        )
    await use_profile(world, "lead", model="m1")
    await world.tk.profiles.add_fallback("lead", "second")
    await world.tk.profiles.add_fallback("lead", "third")


async def _leads(world: World, turns: int) -> list[str]:
    world.server.script(*(Reply(text=f"Reply {n}.") for n in range(turns)))
    info = await world.chats.new_chat("Mira")
    for n in range(turns):
        out = await world.chats.send(info.id, f"Message {n}")
        assert out.status == "completed", out.error
    # every lead answered: one request per turn, so request n is turn n's lead
    assert len(world.server.requests) == turns
    return [str(r.body["model"]) for r in world.server.requests]


async def test_randomizer_off_always_leads_with_the_primary(world: World) -> None:
    await _pool(world)
    assert await _leads(world, 6) == ["m1"] * 6


async def test_randomizer_on_promotes_pool_members_per_turn(world: World) -> None:
    await _pool(world)
    chain = await world.tk.profiles.set_randomize("lead", True)
    assert chain.randomize
    leads = await _leads(world, 8)
    assert set(leads) <= {"m1", "m2", "m3"}
    assert len(set(leads)) > 1  # turns draw afresh (seeded by the turn, not fixed)


async def _order(world: World, seed: str) -> list[str]:
    profile = await world.tk.profiles.get("lead")
    connection = await resolve_profile(world.tk.store, profile, owner=world.tk.owner)
    plan: Plan = await chat_plan(connection, world.chats._plan_sources(), kind="normal", seed=seed)
    return [e.model for e in plan.entries]


async def test_one_seed_draws_one_lead_and_keeps_the_rest_in_order(world: World) -> None:
    await _pool(world)
    await world.tk.profiles.set_randomize("lead", True)
    orders = {tuple(await _order(world, f"chat:{n}:1")) for n in range(12)}
    for order in orders:
        rest = [m for m in ("m1", "m2", "m3") if m != order[0]]
        assert list(order[1:]) == rest  # nothing dropped or duplicated, order kept
    assert len({o[0] for o in orders}) > 1
    assert await _order(world, "chat:5:1") == await _order(world, "chat:5:1")
