"""Response review (brief 003) on real chat turns: set per profile or per chat, with an
inherited or a pinned reviewer; prose is held until reviewed, one revision at most, an
unusable reviewer delivers the reply."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal

import pytest

from tavernkit.chat.review_setup import chat_review, parse_review, set_chat_review
from tavernkit.errors import FormatError, NotFound
from tavernkit.generation.sink import RecordingSink
from tavernkit.models.profile import ConnectionProfile, ReviewSettings

from ._server import Reply
from .conftest import World, use_profile


def verdict(result: str, *findings: tuple[str, str, str]) -> str:
    return json.dumps(
        {
            "verdict": result,
            "findings": [{"category": c, "problem": p, "direction": d} for c, p, d in findings],
        }
    )


def _reviews(world: World) -> list[int]:
    """Indexes of the requests that were reviews (structured output, the reviewer's packet)."""
    return [n for n, r in enumerate(world.server.requests) if "response_format" in r.body]


async def test_profile_review_holds_prose_and_revises_once(world: World) -> None:
    await use_profile(world, "reviewed", model="m1", review={})
    world.server.script(
        Reply(text="Draft one, flat."),
        Reply(text=verdict("revise", ("voice", "too flat", "let Mira speak plainly"))),
        Reply(text="Mira nods. Aboard, then."),
        Reply(text=verdict("revise", ("voice", "still", "again"))),
    )
    info = await world.chats.new_chat("Mira")
    sink = RecordingSink()
    out = await world.chats.send(info.id, "Can I board?", sink=sink)
    assert out.status == "completed", out.error
    # one revision only: the second "revise" delivers the latest candidate
    assert out.text == "Mira nods. Aboard, then."
    assert "Draft one" not in sink.text  # held: the rejected draft never reached the sink
    assert _reviews(world) == [1, 3]
    packet = world.server.requests[1].body["messages"][-1]["content"]
    assert "keeps the ferry" in packet and "Can I board?" in packet
    assert "Draft one, flat." in packet
    revised = world.server.requests[2].body["messages"]
    assert "let Mira speak plainly" in revised[-1]["content"]
    stored = await world.chats.load(info.id)
    assert stored.messages[-1].data["mes"] == "Mira nods. Aboard, then."


async def test_no_review_setting_means_no_review(world: World) -> None:
    world.server.script(Reply(text="Aboard."))
    info = await world.chats.new_chat("Mira")
    assert (await world.chats.send(info.id, "Can I board?")).text == "Aboard."
    assert _reviews(world) == [] and len(world.server.requests) == 1


async def test_chat_setting_wins_over_the_profile(world: World) -> None:
    await use_profile(world, "reviewed", model="m1", review={})
    world.server.script(Reply(text="Aboard."))
    info = await world.chats.new_chat("Mira")
    await world.chats.set_review(info.id, ReviewSettings(enabled=False))
    assert await world.chats.review(info.id) == ReviewSettings(enabled=False)
    assert (await world.chats.send(info.id, "Can I board?")).text == "Aboard."
    assert _reviews(world) == []


async def test_pinned_reviewer_is_another_model(world: World) -> None:
    await world.tk.store.put(
        "connection_profile",
        ConnectionProfile(
            name="critic", source="openai", base_url=world.server.base_url + "/v1", model="judge"
        ),
    )
    world.server.script(Reply(text="Aboard."), Reply(text=verdict("pass")))
    info = await world.chats.new_chat("Mira")
    await set_chat_review(world.tk.store, info.id, parse_review("critic:judge-2"), owner="default")
    out = await world.chats.send(info.id, "Can I board?")
    assert out.text == "Aboard."
    models = [r.body["model"] for r in world.server.requests]
    assert models == ["m1", "judge-2"]


async def test_unusable_pinned_reviewer_delivers_the_reply(world: World) -> None:
    store = world.tk.store
    critic = ConnectionProfile(name="critic", source="openai", base_url="http://127.0.0.1:9/v1")
    await store.put("connection_profile", critic)
    await use_profile(world, "reviewed", model="m1", review={"reviewer_profile": "critic"})
    await store.delete("connection_profile", "critic")  # deleted after it was pinned
    world.server.script(Reply(text="Aboard."))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "Can I board?")
    assert out.status == "completed" and out.text == "Aboard."
    assert len(world.server.requests) == 1
    assert out.result is not None
    assert [t["reason"] for t in out.result.review] == ["pinned_reviewer_unusable"]


async def test_impersonation_is_never_reviewed(world: World) -> None:
    await use_profile(world, "reviewed", model="m1", review={})
    world.server.script(Reply(text="I step aboard."))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.impersonate(info.id)
    assert out.text == "I step aboard." and _reviews(world) == []


async def test_setting_a_missing_reviewer_writes_nothing(world: World) -> None:
    info = await world.chats.new_chat("Mira")
    with pytest.raises(NotFound):
        await set_chat_review(world.tk.store, info.id, parse_review("ghost"), owner="default")
    assert await chat_review(world.tk.store, info.id, owner="default") is None
    with pytest.raises(FormatError, match="PROFILE:MODEL"):
        parse_review("critic:")


async def test_the_tool_checkpoint_rejects_a_call_before_it_runs(world: World) -> None:
    from tavernkit.generation.review import ProposedCall
    from tavernkit.models.profile import CapabilityOverrides
    from tavernkit.tools import FunctionTool

    runs: list[dict[str, object]] = []
    seen: list[str] = []

    async def checkpoint(calls: Sequence[ProposedCall]) -> dict[str, Literal["approve", "reject"]]:
        seen.extend(c.name for c in calls)
        return {c.identity: "reject" for c in calls}

    tool = FunctionTool(
        name="roll",
        description="Roll a die",
        parameters={"type": "object", "properties": {"sides": {"type": "integer"}}},
        action=lambda args: runs.append(args) or 4,
    )
    world.tk.tools.register_function_tool(tool)
    await use_profile(
        world,
        "reviewed",
        model="m1",
        review={},
        capabilities=CapabilityOverrides(supports_tools=True).model_dump(),
    )
    world.chats.review_tool_checkpoint = checkpoint
    world.server.script(
        Reply(tool_calls=[("roll", {"sides": 6})]),
        Reply(text="No dice tonight."),
        Reply(text=verdict("pass")),
    )
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "Roll for me")
    assert out.status == "completed", out.error
    assert out.text == "No dice tonight."
    assert seen == ["roll"] and runs == []  # rejected before it ran
    follow_up = world.server.requests[1].body["messages"]
    assert any("reject" in str(m.get("content", "")).lower() for m in follow_up)
