"""Fault injection: the real Provider and adapters against a scripted upstream on loopback."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tavernkit.errors import RateLimited
from tavernkit.generation.attempt.chat_prompt import TurnBlock, TurnPrompt
from tavernkit.generation.continuation import ContinuationConfig
from tavernkit.generation.keys import KeyPool, PoolKey
from tavernkit.generation.plan import EndpointRef, FundingScope, TurnContext
from tavernkit.generation.sink import ErrorEvent, RecordingSink
from tavernkit.generation.turn import TurnOptions, run_turn
from tavernkit.providers.events import TextDelta
from tavernkit.providers.http import Timeouts
from tavernkit.providers.request import ChatMessage

from ._harness import SERVER, Route, World
from ._upstream import (
    anthropic_error,
    anthropic_stream,
    error,
    hang,
    malformed_sse,
    openai_error,
    openai_json,
    openai_stream,
    openai_stream_error,
)

DM_SERVER = FundingScope("server", "guild-1", workspace="dm-alice", kind="server")

PROMPT = TurnPrompt(
    (
        TurnBlock(ChatMessage("system", "You are Mira, a lighthouse keeper.")),
        TurnBlock(ChatMessage("user", "Tell me about the storm."), history=True, protected=True),
    )
)

# real timeouts of a few tenths of a second: no collector pause may outlast one
pytestmark = pytest.mark.usefixtures("no_gc_pauses")


async def turn(world: World, plan, *, prompt: TurnPrompt = PROMPT, sink=None, **options):
    sink = sink or RecordingSink()
    result = await run_turn(
        plan,
        prompt,
        sink,
        clock=world.clock,
        sleep=world.clock.sleep,
        options=TurnOptions(**options),
    )
    return result, sink


# -- keys -------------------------------------------------------------------------------------


async def test_rotation_then_success(world: World) -> None:
    world.upstream.add(
        openai_error(429, "rate_limit_error", "rate_limit_exceeded", retry_after="7"),
        openai_stream(["The storm ", "came at dusk."]),
    )
    plan = world.plan([Route("gpt-4o", keys=["sk-first-key-0001", "sk-second-key-002"])])
    result, sink = await turn(world, plan)

    assert result.status == "completed"
    assert result.text == sink.text == "The storm came at dusk."
    assert [r.key for r in world.upstream.requests] == ["sk-first-key-0001", "sk-second-key-002"]
    assert result.counters.rotations == 1 and result.counters.fallbacks == 0
    assert result.notice is None and not sink.errors and not sink.notices
    assert [a.outcome for a in result.attempts] == ["error", "completed"]
    assert result.attempts[0].error_class == "rate_limit" and result.attempts[0].safe_code == "429"
    # the failing key rests 60 s (Retry-After 7 is shorter); the good one is credited
    first = await world.cooldowns.get("alice", "openai", "gpt-4o#0")
    second = await world.cooldowns.get("alice", "openai", "gpt-4o#1")
    assert first.cooldown_until == world.clock.now + 60 and first.error_class == "rate_limit"
    assert second.uses == 1 and second.cooldown_until is None
    assert sink.cleaned == 1 and len(sink.finalized) == 1


async def test_retry_after_longer_than_default_is_honoured(world: World) -> None:
    world.upstream.add(openai_error(429, "rate_limit_error", retry_after="120"), openai_json("ok"))
    plan = world.plan([Route("gpt-4o", keys=["a-key-1", "a-key-2"])])
    result, _ = await turn(world, plan, stream=False)
    assert result.text == "ok"
    state = await world.cooldowns.get("alice", "openai", "gpt-4o#0")
    assert state.cooldown_until == world.clock.now + 120


async def test_auth_error_rotates_to_next_key(world: World) -> None:
    world.upstream.add(
        openai_error(401, "invalid_request_error", "invalid_api_key"), openai_stream(["Fine."])
    )
    plan = world.plan([Route("gpt-4o", keys=["bad-key-1", "good-key-2"])])
    result, _ = await turn(world, plan)
    assert result.status == "completed" and result.attempts[0].error_class == "auth"


async def test_all_keys_cooling(world: World) -> None:
    plan = world.plan([Route("gpt-4o", keys=["key-one-1", "key-two-2"])])
    pool = world.pool(world.routes[("gpt-4o", "native:openai")], "alice")
    for key in pool.keys:
        await pool.record_failure(key, RateLimited("slow down", retry_after=30))
    world.clock.now += 10
    result, sink = await turn(world, plan)

    assert result.status == "failed" and world.upstream.requests == []
    assert result.error is not None and result.error.error_class == "keys_cooling"
    assert result.error.retry_after == pytest.approx(50)
    assert [e.error_class for e in sink.errors] == ["keys_cooling"]


async def test_every_key_rate_limited_reports_terminal_error_once(world: World) -> None:
    world.upstream.add(
        openai_error(429, "rate_limit_error", message="your prompt 'secret plot' was too long"),
        openai_error(429, "rate_limit_error", message="your prompt 'secret plot' was too long"),
    )
    plan = world.plan([Route("gpt-4o", keys=["key-one-1", "key-two-2"])])
    result, sink = await turn(world, plan)
    assert result.status == "failed" and len(world.upstream.requests) == 2
    assert len(sink.errors) == 1 and result.failure_reported
    assert "secret plot" not in sink.errors[0].text()


async def test_timeout_never_rotates_keys_and_is_not_credited(world: World) -> None:
    world.timeouts = Timeouts(first_byte=0.2, idle=0.2)
    world.upstream.add(hang(), openai_stream(["Backup speaking."]))
    plan = world.plan(
        [Route("gpt-4o", keys=["slow-key-1", "spare-key-2"]), Route("gpt-4o-mini", keys=["m1"])]
    )
    result, _ = await turn(world, plan)
    assert result.status == "completed" and result.model == "scripted"
    assert [r.key for r in world.upstream.requests] == ["slow-key-1", "m1"]
    assert result.attempts[0].outcome == "timeout" and result.counters.rotations == 0
    slow = await world.cooldowns.get("alice", "openai", "gpt-4o#0")
    assert slow.uses == 0 and slow.cooldown_until is None


async def test_byok_pool_never_holds_server_keys() -> None:
    async def load(_: PoolKey) -> str:
        return "x"

    with pytest.raises(ValueError, match="not 'user'"):
        KeyPool(
            "alice",
            "openai",
            [PoolKey("s1", source="server")],
            source="user",
            load_secret=load,
            clock=lambda: 0.0,
        )


# -- fallback ---------------------------------------------------------------------------------


async def test_fallback_then_success_with_notice(world: World) -> None:
    world.upstream.add(
        error(500, "internal error while reading 'my private diary'"),
        anthropic_stream(["Waves broke ", "over the rail."]),
    )
    plan = world.plan([Route("gpt-4o"), Route("claude-sonnet-4-5", family="anthropic")])
    result, sink = await turn(world, plan)

    assert result.status == "completed" and result.attempt_index == 1
    assert result.text == "Waves broke over the rail."
    assert world.upstream.requests[1].path == "/v1/messages"
    assert result.notice is not None and sink.notices == [result.notice]
    failure = result.notice.failures[0]
    assert (failure.model, failure.error_class, failure.code) == ("gpt-4o", "overloaded", "500")
    assert "diary" not in result.notice.text() and not sink.errors
    assert result.counters.fallbacks == 1
    assert result.usage is not None and result.usage.input_tokens == 10
    assert result.attempts[0].paid_by == "user:alice"


async def test_anthropic_529_and_in_stream_error_fall_back(world: World) -> None:
    world.upstream.add(
        anthropic_error(529, "overloaded_error"),
        anthropic_stream([], error_type="overloaded_error"),
        openai_stream(["Third time."]),
    )
    plan = world.plan(
        [
            Route("claude-sonnet-4-5", family="anthropic"),
            Route("claude-opus-4-1", family="anthropic"),
            Route("gpt-4o"),
        ]
    )
    result, _ = await turn(world, plan)
    assert result.text == "Third time."
    assert [f.error_class for f in result.notice.failures] == ["overloaded", "overloaded"]
    assert result.notice.failures[0].code == "529"


async def test_malformed_sse_is_a_protocol_error(world: World) -> None:
    world.upstream.add(malformed_sse([]), openai_stream(["Recovered."]))
    plan = world.plan([Route("gpt-4o", keys=["k-1"]), Route("gpt-4o-mini")])
    result, _ = await turn(world, plan)
    assert result.text == "Recovered."
    assert result.notice.failures[0].error_class == "protocol"


# -- continuation -----------------------------------------------------------------------------


async def test_cut_then_continuation_with_native_prefill(world: World) -> None:
    world.upstream.add(
        openai_stream(["Hello there. ", "The night is"], cut=True),
        anthropic_stream([" The night is dark", " and long."]),
    )
    plan = world.plan(
        [Route("gpt-4o"), Route("claude-sonnet-4-5", family="anthropic", supports_prefill=True)]
    )
    result, sink = await turn(world, plan)

    # shown as it arrived; the unfinished clause was taken back and the continuation wrote it
    assert next(e.text for e in sink.events if isinstance(e, TextDelta)) == "Hello there. "
    assert sink.withdrawn == [" The night is"]
    assert result.text == sink.text == "Hello there. The night is dark and long."
    last = world.upstream.requests[1].body["messages"][-1]
    assert last == {"role": "assistant", "content": [{"type": "text", "text": "Hello there."}]}
    assert result.attempts[1].continuation and result.attempts[1].prefill_mode == "native"
    assert result.counters.continuations == 1
    assert result.notice is not None and result.notice.failures[0].error_class in (
        "network",
        "interrupted",
    )


async def test_cut_then_tail_directive_with_exact_echo_strip(world: World) -> None:
    world.upstream.add(
        openai_stream(["Hello there. ", "The night is"], cut=True),
        openai_stream(["Hello th", "ere. The ni", "ght is dark."]),
    )
    plan = world.plan([Route("gpt-4o"), Route("o3", supports_prefill=False)])
    config = ContinuationConfig(directive="Already sent: <<{text}>>. Go on.")
    result, sink = await turn(world, plan, continuation=config)

    assert result.text == sink.text == "Hello there. The night is dark."
    messages = world.upstream.requests[1].body["messages"]
    assert messages[-1] == {
        "role": "user",
        "content": "[System: Already sent: <<Hello there.>>. Go on.]",
    }
    assert messages[-2]["content"] == "Tell me about the storm."  # the trigger stays in place
    assert result.attempts[1].prefill_mode == "directive"


async def test_echo_that_diverges_is_shown_whole(world: World) -> None:
    world.upstream.add(
        openai_stream(["Hello there. ", "The"], cut=True),
        openai_stream(["Hello the", "re, and then more."]),
    )
    plan = world.plan([Route("gpt-4o"), Route("o3", supports_prefill=False)])
    result, _ = await turn(world, plan)
    # a diverging echo is not an echo: every character the model wrote is kept
    assert result.text == "Hello there. Hello there, and then more."


async def test_two_successive_cuts_accumulate(world: World) -> None:
    world.upstream.add(
        openai_stream(["One. ", "Tw"], cut=True),
        openai_stream([" Two. ", "Thr"], cut=True),
        openai_stream([" Three."]),
    )
    plan = world.plan([Route("gpt-4o"), Route("gpt-4o-mini"), Route("gpt-4.1")])
    result, sink = await turn(world, plan)
    assert result.text == sink.text == "One. Two. Three."
    prefills = [r.body["messages"][-1]["content"] for r in world.upstream.requests[1:]]
    assert prefills == ["One.", "One. Two."]
    assert result.counters.continuations == 2
    assert [a.delivered_chars for a in result.attempts] == [4, 5, 7]


async def test_carried_text_is_never_macro_evaluated(world: World) -> None:
    world.upstream.add(
        openai_stream(["Hi {{user}}, {text} stays. ", "More"], cut=True),
        openai_stream([" More."]),
    )
    plan = world.plan([Route("gpt-4o"), Route("o3", supports_prefill=False)])
    result, _ = await turn(world, plan)
    directive = world.upstream.requests[1].body["messages"][-1]["content"]
    assert "Hi {{user}}, {text} stays." in directive
    assert result.text == "Hi {{user}}, {text} stays. More."


async def test_manual_prefill_is_replaced_by_carried_text(world: World) -> None:
    prompt = TurnPrompt(PROMPT.blocks, prefill="Sure,")
    world.upstream.add(
        openai_stream([" the plan is simple. ", "First we"], cut=True),
        openai_stream([" First we wait."]),
    )
    plan = world.plan([Route("gpt-4o"), Route("gpt-4o-mini")])
    result, sink = await turn(world, plan, prompt=prompt)

    first, second = (r.body["messages"] for r in world.upstream.requests)
    assert first[-1] == {"role": "assistant", "content": "Sure,"}
    assert second[-1] == {"role": "assistant", "content": "Sure, the plan is simple."}
    assert sum(m["role"] == "assistant" for m in second) == 1
    assert result.text == sink.text == "Sure, the plan is simple. First we wait."


async def test_terminal_failure_keeps_delivered_text(world: World) -> None:
    world.upstream.add(openai_stream(["The lamp flickered. ", "Then the gl"], cut=True))
    plan = world.plan([Route("gpt-4o")])
    result, sink = await turn(world, plan)

    assert result.status == "failed"
    # the error is visible, so the held clause is shown first and kept
    assert result.text == sink.text == "The lamp flickered. Then the gl"
    assert isinstance(sink.events[-1], ErrorEvent) and len(sink.errors) == 1
    assert sink.flushes >= 1 and sink.finalized[0] is result
    assert result.error is not None and result.error.reported


async def test_in_stream_error_after_text_continues(world: World) -> None:
    world.upstream.add(
        openai_stream_error(["Rain fell. ", "It"]),
        openai_stream([" It did not stop."]),
    )
    plan = world.plan([Route("gpt-4o"), Route("gpt-4o-mini")])
    result, _ = await turn(world, plan)
    assert result.text == "Rain fell. It did not stop."


async def test_settle_time_after_timeout_bounds_late_sends(world: World) -> None:
    world.timeouts = Timeouts(first_byte=5, idle=0.3)
    gate = asyncio.Event()

    async def slow(event) -> None:
        if isinstance(event, TextDelta) and "Second" in event.text:
            await gate.wait()

    world.clock.on_sleep = lambda _: asyncio.get_running_loop().call_later(0.05, gate.set)
    world.upstream.add(
        openai_stream(["First. ", "Second. ", "Thi"], hang=True),
        openai_stream([" Third."]),
    )
    plan = world.plan([Route("gpt-4o"), Route("gpt-4o-mini")])
    result, _sink = await turn(world, plan, sink=RecordingSink(before_emit=slow))

    assert world.clock.sleeps == [5.0]
    # the late send is shown and stored, but the continuation was asked to follow "First."
    assert world.upstream.requests[1].body["messages"][-1]["content"] == "First."
    assert result.text == "First. Second. Third."
    assert result.attempts[0].outcome == "timeout"


async def test_non_streaming_failure_starts_fresh(world: World) -> None:
    world.upstream.add(error(503), openai_json("Complete answer."))
    plan = world.plan([Route("gpt-4o"), Route("gpt-4o-mini")])
    result, _ = await turn(world, plan, stream=False)
    assert result.text == "Complete answer."
    assert world.upstream.requests[1].body["messages"][-1]["role"] == "user"


# -- empty replies and the speaker guard -------------------------------------------------------


async def test_empty_reply_is_retried_once(world: World) -> None:
    world.upstream.add(openai_stream([]), openai_stream(["Now with words."]))
    result, _ = await turn(world, world.plan([Route("gpt-4o")]))
    assert result.text == "Now with words." and len(world.upstream.requests) == 2


async def test_empty_continuation_completes_with_carried_text(world: World) -> None:
    world.upstream.add(openai_stream(["All done. ", "x"], cut=True), openai_stream(["All done."]))
    plan = world.plan([Route("gpt-4o"), Route("gpt-4o-mini")])
    result, _ = await turn(world, plan)
    assert result.status == "completed" and result.text == "All done."
    assert len(world.upstream.requests) == 2


async def test_empty_continuation_at_the_token_cap_is_a_failure(world: World) -> None:
    world.upstream.add(
        openai_stream(["Half. ", "x"], cut=True),
        openai_stream([], finish="length"),
        openai_stream([" Whole."]),
    )
    plan = world.plan([Route("gpt-4o"), Route("gpt-4o-mini"), Route("gpt-4.1")])
    result, _ = await turn(world, plan)
    assert result.text == "Half. Whole."
    assert [f.error_class for f in result.notice.failures][1] == "length_cap"


async def test_speaker_guard_discards_and_retries_once(world: World) -> None:
    world.upstream.add(
        openai_stream(["Alex", ": I open the door."]),
        openai_stream(["Mira smiles.\nAlex: and I"]),
    )
    plan = world.plan([Route("gpt-4o")])
    result, sink = await turn(world, plan, user_names=("Alex",), char_name="Mira")
    assert result.text == sink.text == "Mira smiles."
    retry = world.upstream.requests[1].body["messages"][-1]["content"]
    assert retry.startswith("[System: Your previous attempt started as the wrong speaker")
    assert "Mira" in retry


# -- scoping, admission, deferred route -------------------------------------------------------


async def test_foreign_endpoint_is_refused_before_any_key_loads(world: World) -> None:
    world.upstream.add(openai_stream(["Own route."]))
    bob_endpoint = Route(
        "bob-model", endpoint=EndpointRef("ep-bob", owner_user="bob"), keys=["bob-secret-key"]
    )
    server_endpoint = Route(
        "srv-model", endpoint=EndpointRef("ep-srv", owner_server="guild-1"), keys=["srv-secret-key"]
    )
    plan = world.plan([bob_endpoint, server_endpoint, Route("gpt-4o", keys=["alice-key"])])
    result, _ = await turn(world, plan)

    assert result.text == "Own route."
    assert world.resolved == ["gpt-4o"] and world.loaded_secrets == ["alice-key"]
    skipped = [a for a in result.attempts if a.outcome == "skipped"]
    assert [a.reason for a in skipped] == ["endpoint not owned by this scope"] * 2


async def test_deferred_route_admission_refused(world: World) -> None:
    asked = []

    async def admission(req) -> bool:
        asked.append((req.purpose, req.scope.payer))
        return req.purpose != "deferred_route"

    world.upstream.add(error(500))
    plan = world.plan(
        [Route("gpt-4o")],
        deferred=(SERVER, [Route("server-model", keys=["server-key"], credential="server")]),
        admission=admission,
    )
    result, sink = await turn(world, plan)
    assert result.status == "failed" and world.deferred_calls == 0
    assert asked == [("attempt", "user"), ("deferred_route", "server")]
    assert "server-key" not in world.loaded_secrets and len(sink.errors) == 1


async def test_deferred_route_runs_after_personal_failures_and_server_pays(world: World) -> None:
    world.upstream.add(error(500), openai_stream(["Server answered."]))
    plan = world.plan(
        [Route("gpt-4o")],
        deferred=(DM_SERVER, [Route("server-model", keys=["server-key"], credential="server")]),
    )
    result, _ = await turn(world, plan)
    assert result.text == "Server answered." and world.deferred_calls == 1
    assert result.attempts[1].paid_by == "server:guild-1" and result.attempts[1].source == "server"
    assert result.attempts[1].label.startswith("deferred 1")


@pytest.mark.parametrize("why", ["impersonation", "opt_out", "other_workspace"])
async def test_deferred_route_withheld(world: World, why: str) -> None:
    world.upstream.add(error(500))
    context = TurnContext(
        "alice", workspace="dm-alice", private=True, impersonation=why == "impersonation"
    )
    plan = world.plan(
        [Route("gpt-4o")],
        context=context,
        deferred=(
            SERVER if why == "other_workspace" else DM_SERVER,
            [Route("server-model", keys=["server-key"], credential="server")],
        ),
        deferred_opt_out=why == "opt_out",
    )
    result, _ = await turn(world, plan)
    assert result.status == "failed" and world.deferred_calls == 0


# -- sink and logging ---------------------------------------------------------------------------


async def test_cleanup_error_never_hides_the_result(world: World) -> None:
    world.upstream.add(openai_stream(["Fine."]))
    sink = RecordingSink(cleanup_error=RuntimeError("webhook gone"))
    result, _ = await turn(world, world.plan([Route("gpt-4o")]), sink=sink)
    assert result.status == "completed" and sink.cleaned == 1


async def test_logs_carry_no_prompt_and_no_key(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tavernkit.generation")
    world.upstream.add(error(500, "echo: Tell me about the storm."), openai_stream(["Ok."]))
    plan = world.plan([Route("gpt-4o", keys=["sk-supersecret-123456"]), Route("gpt-4o-mini")])
    await turn(world, plan)
    text = caplog.text
    assert "attempt 0" in text and "overloaded (500)" in text
    assert "supersecret" not in text and "storm" not in text and "Ok." not in text


async def test_unexpected_sink_failure_is_reported_and_raised(world: World) -> None:
    async def broken(_event) -> None:
        raise RuntimeError("sink exploded")

    world.upstream.add(openai_stream(["Hi."]))
    sink = RecordingSink(before_emit=broken)
    with pytest.raises(RuntimeError, match="sink exploded"):
        await turn(world, world.plan([Route("gpt-4o")]), sink=sink)
    assert sink.cleaned == 1
