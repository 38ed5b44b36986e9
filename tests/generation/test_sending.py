"""The sending rules every attempt's provider runs behind (``before_request``, the provider's
same-request retry policy, abort before the first event, observation) and tool calls the turn
leaves to its caller — against the scripted upstream on loopback."""

from __future__ import annotations

import asyncio
import dataclasses

from tavernkit.generation.sink import RecordingSink
from tavernkit.generation.turn import TurnOptions, run_turn
from tavernkit.providers.events import StreamEvent, TextDelta
from tavernkit.providers.request import ChatMessage, ChatPrompt, PromptRequest, ToolSpec
from tavernkit.providers.retry import RetryPolicy

from ._harness import Route, World
from ._upstream import hang, openai_error, openai_stream

PROMPT = ChatPrompt((ChatMessage("user", "Tell me about the storm."),))


async def turn(world: World, plan, prompt=PROMPT, abort=None, **options):
    sink = RecordingSink()
    result = await run_turn(
        plan,
        prompt,
        sink,
        clock=world.clock,
        sleep=world.clock.sleep,
        options=TurnOptions(**options),
        abort=abort,
    )
    return result, sink


async def test_retry_policy_repeats_the_request_with_the_same_key(world: World) -> None:
    world.upstream.add(
        openai_error(429, "rate_limit_error", retry_after="3"),
        openai_error(503, "server_error"),
        openai_stream(["The storm came."]),
    )
    plan = world.plan([Route("gpt-4o", keys=["sk-only-key-00001"])])
    policy = RetryPolicy(max_retries=2, base_delay=0.5, jitter=0.0)
    result, _ = await turn(world, plan, retry=policy)
    assert result.status == "completed" and result.text == "The storm came."
    keys = [r.key for r in world.upstream.requests]
    assert keys == ["sk-only-key-00001"] * 3  # a retry is not a rotation
    assert world.clock.sleeps == [3.0, 1.0]  # Retry-After, then back-off 0.5 * 2
    assert result.counters.rotations == 0 and [a.outcome for a in result.attempts] == ["completed"]


async def test_a_rate_limit_moves_to_a_ready_key_instead_of_waiting(world: World) -> None:
    world.upstream.add(
        openai_error(429, "rate_limit_error", retry_after="90"),
        openai_error(503, "server_error"),
        openai_stream(["The storm came."]),
    )
    plan = world.plan([Route("gpt-4o", keys=["sk-only-key-00001", "sk-other-key-0002"])])
    policy = RetryPolicy(max_retries=2, base_delay=0.5, jitter=0.0)
    result, _ = await turn(world, plan, retry=policy)
    assert result.status == "completed" and result.text == "The storm came."
    keys = [r.key for r in world.upstream.requests]
    # the rate-limited key rests; the other key takes the turn, and its 503 is retried in place
    assert keys == ["sk-only-key-00001", "sk-other-key-0002", "sk-other-key-0002"]
    assert world.clock.sleeps == [0.5]
    assert result.counters.rotations == 1
    assert [a.outcome for a in result.attempts] == ["error", "completed"]


async def test_without_a_retry_policy_the_next_key_answers(world: World) -> None:
    world.upstream.add(openai_error(503, "server_error"), openai_stream(["Fine."]))
    plan = world.plan([Route("gpt-4o", keys=["sk-only-key-00001", "sk-other-key-0002"])])
    result, _ = await turn(world, plan)
    assert result.text == "Fine." and result.counters.rotations == 1
    assert world.clock.sleeps == []


async def test_before_request_sees_and_replaces_every_request(world: World) -> None:
    world.upstream.add(openai_stream(["Calm."]))
    seen: list[tuple[PromptRequest, bool]] = []

    def hook(request: PromptRequest, stream: bool) -> PromptRequest:
        seen.append((request, stream))
        assert isinstance(request, ChatPrompt)
        return dataclasses.replace(
            request, sampling=dataclasses.replace(request.sampling, temperature=0.125)
        )

    events: list[StreamEvent] = []
    result, _ = await turn(
        world, world.plan([Route("gpt-4o")]), before_request=hook, observe=events.append
    )
    assert result.text == "Calm."
    assert len(seen) == 1 and seen[0][1] is True
    assert world.upstream.requests[0].body["temperature"] == 0.125
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Calm."]


async def test_abort_stops_a_request_that_never_answers(world: World) -> None:
    world.upstream.add(hang())
    abort = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, abort.set)
    result, sink = await asyncio.wait_for(
        turn(world, world.plan([Route("gpt-4o")]), abort=abort), 3
    )
    assert result.status == "aborted" and result.text == ""
    assert not sink.errors and sink.cleaned == 1


async def test_tool_calls_without_tools_to_run_are_the_callers(world: World) -> None:
    world.upstream.add(openai_stream([], tool_calls=[("call_1", "roll", '{"sides": 6}')]))
    prompt = dataclasses.replace(PROMPT, tools=(ToolSpec("roll", "a die", {"type": "object"}),))
    result, _ = await turn(world, world.plan([Route("gpt-4o")]), prompt)
    assert result.status == "completed" and result.text == ""
    assert result.completion is not None
    assert [(c.name, c.arguments) for c in result.completion.tool_calls] == [
        ("roll", '{"sides": 6}')
    ]
    assert len(world.upstream.requests) == 1  # not retried as an empty reply
