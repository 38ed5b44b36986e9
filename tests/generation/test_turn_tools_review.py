"""Tool calls across attempts and response review, against the scripted upstream."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tavernkit.generation.attempt.chat_prompt import TurnBlock, TurnPrompt
from tavernkit.generation.plan import TurnContext
from tavernkit.generation.review import ContentSelection, ReviewConfig, ReviewEvidence
from tavernkit.generation.sink import RecordingSink
from tavernkit.generation.turn import TurnOptions, run_turn
from tavernkit.providers.request import ChatMessage, ToolSpec
from tavernkit.tools.registry import FunctionTool

from ._harness import Route, World
from ._upstream import error, openai_json, openai_stream

TRIGGER = ChatMessage("user", "Roll for the storm, please.")
PROMPT = TurnPrompt(
    (
        TurnBlock(ChatMessage("system", "You are Mira, a lighthouse keeper.")),
        TurnBlock(TRIGGER, history=True, protected=True),
    ),
    tools=(ToolSpec("roll", "Roll a die", {"type": "object", "properties": {"sides": {}}}),),
)


def dice(calls: list[dict[str, Any]]) -> FunctionTool:
    def roll(args: dict[str, Any]) -> str:
        calls.append(args)
        return "7"

    return FunctionTool("roll", "Roll a die", action=roll)


async def turn(world: World, plan, sink: RecordingSink | None = None, **options):
    sink = sink or RecordingSink()
    result = await run_turn(
        plan,
        PROMPT,
        sink,
        clock=world.clock,
        sleep=world.clock.sleep,
        options=TurnOptions(**options),
    )
    return result, sink


# -- tools ------------------------------------------------------------------------------------


async def test_identical_tool_call_is_not_rerun_on_the_replacement_attempt(world: World) -> None:
    runs: list[dict[str, Any]] = []
    world.upstream.add(
        openai_stream([], finish="tool_calls", tool_calls=[("call_a", "roll", '{"sides": 20}')]),
        error(500),
        # the replacement model asks again: new id, other spacing, same call
        openai_stream([], finish="tool_calls", tool_calls=[("call_b", "roll", '{ "sides" : 20 }')]),
        openai_stream(["You rolled 7."]),
    )
    plan = world.plan([Route("gpt-4o"), Route("gpt-4o-mini")])
    result, sink = await turn(world, plan, tools=[dice(runs)])

    assert result.status == "completed" and result.text == "You rolled 7."
    assert runs == [{"sides": 20}]
    assert result.counters.replayed_tools == 1
    told = world.upstream.requests[2].body["messages"][-1]
    assert (
        told["role"] == "user" and "already ran" in told["content"] and "roll(" in told["content"]
    )
    last = world.upstream.requests[3].body["messages"]
    assert last[-1] == {"role": "tool", "content": "7", "tool_call_id": "call_b"}
    assert [i.id for i in result.tool_invocations] == ["call_b"]
    assert any(getattr(e, "replayed", False) for e in sink.events)


async def test_a_tool_may_run_twice_within_one_attempt(world: World) -> None:
    runs: list[dict[str, Any]] = []
    world.upstream.add(
        openai_stream(
            [],
            finish="tool_calls",
            tool_calls=[("c1", "roll", '{"sides": 6}'), ("c2", "roll", '{"sides": 6}')],
        ),
        openai_stream(["Two sixes."]),
    )
    result, _ = await turn(world, world.plan([Route("gpt-4o")]), tools=[dice(runs)])
    assert result.text == "Two sixes." and len(runs) == 2
    assert len(result.tool_invocations) == 2


async def test_tools_dropped_for_a_model_without_tools(world: World) -> None:
    world.upstream.add(error(500), openai_stream(["No tools here."]))
    plan = world.plan([Route("gpt-4o"), Route("deepseek-reasoner", supports_tools=False)])
    result, _ = await turn(world, plan, tools=[dice([])])
    assert result.text == "No tools here."
    assert "tools" in world.upstream.requests[0].body
    assert "tools" not in world.upstream.requests[1].body


# -- review -----------------------------------------------------------------------------------

EVIDENCE = ReviewEvidence(
    persona="Mira keeps the lighthouse and speaks plainly.",
    trigger=TRIGGER,
    reply_target="Alex",
    history=(ChatMessage("user", "Earlier chat."), ChatMessage("assistant", "Earlier reply.")),
    tools=PROMPT.tools,
)


def verdict(result: str, *findings: tuple[str, str, str]) -> str:
    return json.dumps(
        {
            "verdict": result,
            "findings": [{"category": c, "problem": p, "direction": d} for c, p, d in findings],
        }
    )


def review(**kw: Any) -> ReviewConfig:
    return ReviewConfig(enabled=True, evidence=EVIDENCE, **kw)


async def test_review_pass_holds_prose_until_reviewed(world: World) -> None:
    seen_at_emit: list[int] = []

    async def spy(_event: Any) -> None:
        seen_at_emit.append(len(world.upstream.requests))

    world.upstream.add(openai_stream(["A fine ", "reply."]), openai_json(verdict("pass")))
    result, sink = await turn(
        world, world.plan([Route("gpt-4o")]), RecordingSink(before_emit=spy), review=review()
    )
    assert result.text == sink.text == "A fine reply."
    assert seen_at_emit and min(seen_at_emit) == 2  # nothing shown before the reviewer answered
    reviewer = world.upstream.requests[1].body
    assert reviewer["response_format"]["type"] == "json_schema"
    packet = reviewer["messages"][-1]["content"]
    order = [
        packet.index(tag) for tag in ("<persona>", "<trigger", "<context>", "<tools>", "<candidate")
    ]
    assert order == sorted(order)
    assert "roll(sides): Roll a die" in packet
    assert result.review[0]["verdict"] == "pass" and result.counters.reviews == 1


async def test_review_revise_then_pass_delivers_the_revision(world: World) -> None:
    world.upstream.add(
        openai_stream(["Draft one."]),
        openai_json(verdict("revise", ("voice", "Too formal.", "Speak plainly."))),
        openai_stream(["Draft two."]),
        openai_json(verdict("pass")),
    )
    result, sink = await turn(world, world.plan([Route("gpt-4o")]), review=review())
    assert result.text == sink.text == "Draft two."
    revision = world.upstream.requests[2].body["messages"]
    assert revision[-2] == {"role": "assistant", "content": "Draft one."}
    assert "Too formal." in revision[-1]["content"] and revision[-1]["role"] == "user"
    second_packet = world.upstream.requests[3].body["messages"][-1]["content"]
    assert '<finding category="voice">' in second_packet
    assert result.counters.revisions == 1 and result.counters.reviews == 2
    # the stable evidence is a shared prefix of both packets (prompt-cache reuse)
    first_packet = world.upstream.requests[1].body["messages"][-1]["content"]
    cut = first_packet.index("<candidate")
    assert second_packet[:cut] == first_packet[:cut]


async def test_second_revise_delivers_the_latest_candidate(world: World) -> None:
    world.upstream.add(
        openai_stream(["Draft one."]),
        openai_json(verdict("revise", ("repetition", "Echoes.", "Vary it."))),
        openai_stream(["Draft two."]),
        openai_json(verdict("revise", ("initiative", "Passive.", "Act."))),
    )
    result, _ = await turn(world, world.plan([Route("gpt-4o")]), review=review())
    assert result.text == "Draft two." and len(world.upstream.requests) == 4


async def test_review_unavailable_for_credential_shaped_candidate(world: World) -> None:
    world.upstream.add(openai_stream(["The key is sk-abcdefghijklmnopqrstuvwxyz0123."]))
    result, _ = await turn(world, world.plan([Route("gpt-4o")]), review=review())
    assert result.text == "The key is sk-abcdefghijklmnopqrstuvwxyz0123."
    assert len(world.upstream.requests) == 1  # no reviewer call
    assert result.review[-1]["reason"] == "candidate_contains_credential"


async def test_review_unavailable_for_malformed_verdict(world: World) -> None:
    world.upstream.add(openai_stream(["Plain reply."]), openai_json("I think it is fine"))
    result, _ = await turn(world, world.plan([Route("gpt-4o")]), review=review())
    assert result.text == "Plain reply."
    assert result.review[-1]["verdict"] == "unavailable"
    assert result.review[-1]["reason"] == "malformed_verdict"


async def test_review_unavailable_when_admission_refuses_the_side_call(world: World) -> None:
    async def admission(req: Any) -> bool:
        return req.purpose != "review"

    world.upstream.add(openai_stream(["Reply."]))
    plan = world.plan([Route("gpt-4o")], admission=admission)
    result, _ = await turn(world, plan, review=review())
    assert result.text == "Reply." and result.review[-1]["reason"] == "admission_refused"


async def test_failed_drafting_attempt_discards_pending_text(world: World) -> None:
    world.upstream.add(
        openai_stream(["Held draft. ", "More"], cut=True),
        openai_stream(["Fresh reply."]),
        openai_json(verdict("pass")),
    )
    plan = world.plan([Route("gpt-4o"), Route("gpt-4o-mini")])
    result, sink = await turn(world, plan, review=review())
    assert result.text == sink.text == "Fresh reply."
    assert world.upstream.requests[1].body["messages"][-1]["role"] == "user"
    assert result.counters.continuations == 0


async def test_no_review_for_impersonation(world: World) -> None:
    world.upstream.add(openai_stream(["As Alex."]))
    plan = world.plan([Route("gpt-4o")], context=TurnContext("alice", impersonation=True))
    result, _ = await turn(world, plan, review=review())
    assert result.text == "As Alex." and len(world.upstream.requests) == 1


async def test_tool_checkpoint_rejection_persists_for_the_turn(world: World) -> None:
    runs: list[dict[str, Any]] = []
    asked: list[str] = []

    async def checkpoint(calls: Any) -> dict[str, str]:
        asked.extend(c.name for c in calls)
        return {c.identity: "reject" for c in calls}

    world.upstream.add(
        openai_stream([], finish="tool_calls", tool_calls=[("c1", "roll", '{"sides": 4}')]),
        openai_stream([], finish="tool_calls", tool_calls=[("c2", "roll", '{"sides": 4}')]),
        openai_stream(["No roll then."]),
        openai_json(verdict("pass")),
    )
    config = review(tool_checkpoint=checkpoint)
    result, _ = await turn(world, world.plan([Route("gpt-4o")]), tools=[dice(runs)], review=config)
    assert runs == [] and asked == ["roll"]  # the second identical proposal is refused unasked
    assert result.text == "No roll then."
    tool_msg = world.upstream.requests[1].body["messages"][-1]
    assert tool_msg["role"] == "tool" and "rejected by review" in tool_msg["content"]


async def test_without_tool_selection_the_packet_has_no_tools(world: World) -> None:
    world.upstream.add(openai_stream(["Reply."]), openai_json(verdict("pass")))
    config = review(selection=ContentSelection(tools=False))
    await turn(world, world.plan([Route("gpt-4o")]), review=config)
    body = world.upstream.requests[1].body
    assert "<tools>" not in body["messages"][-1]["content"]
    schema = body["response_format"]["json_schema"]["schema"]
    assert (
        "tool_use"
        not in schema["properties"]["findings"]["items"]["properties"]["category"]["enum"]
    )


async def test_pinned_reviewer_uses_its_own_model_and_key(world: World) -> None:
    pinned = Route("gpt-4.1", keys=["reviewer-key-1"])
    world.routes[("gpt-4.1", "native:openai")] = pinned
    world.upstream.add(openai_stream(["Reply."]), openai_json(verdict("pass")))
    config = review(reviewer=pinned.entry())
    result, _ = await turn(world, world.plan([Route("gpt-4o", keys=["author-key"])]), review=config)
    assert result.text == "Reply."
    reviewer = world.upstream.requests[1]
    assert reviewer.key == "reviewer-key-1" and reviewer.body["model"] == "gpt-4.1"


async def test_pinned_reviewer_of_another_owner_is_unavailable(world: World) -> None:
    from tavernkit.generation.plan import EndpointRef, PlanEntry

    foreign = PlanEntry("bob-model", "openai", endpoint=EndpointRef("ep", owner_user="bob"))
    world.upstream.add(openai_stream(["Reply."]))
    result, _ = await turn(world, world.plan([Route("gpt-4o")]), review=review(reviewer=foreign))
    assert result.text == "Reply." and len(world.upstream.requests) == 1
    assert result.review[-1]["reason"] == "pinned_reviewer_unusable"
    assert "bob-model" not in world.resolved


async def test_abort_discards_held_prose(world: World) -> None:
    abort = asyncio.Event()
    # the draft arrives, then the upstream stalls; the user stops the generation meanwhile
    world.upstream.add(openai_stream(["Draft that will ", "never be shown."], hang=True))
    asyncio.get_running_loop().call_later(0.2, abort.set)
    sink = RecordingSink()
    result = await run_turn(
        world.plan([Route("gpt-4o")]),
        PROMPT,
        sink,
        clock=world.clock,
        sleep=world.clock.sleep,
        options=TurnOptions(review=review()),
        abort=abort,
    )
    assert result.status == "aborted" and result.text == "" and sink.text == ""
    assert len(world.upstream.requests) == 1  # no reviewer call, no fallback
    assert not sink.errors and sink.cleaned == 1
