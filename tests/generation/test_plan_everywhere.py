"""Keys and plans beyond one chat turn, through ``Tavern`` on a scripted upstream (loopback):

- a key is cooled only for what the key did, and a failed turn reports the last real error;
- environment keys (and mixed stored + env pools) keep their cooldowns across turns and tasks
  of a Tavern (stored keys across Taverns: the store);
- ``generate_task``, ``generate_raw`` and quiet prompts run the chat turn's plan: the pool, its
  cooldowns, the fallback chain; a JSON task is never continued from a cut, it is regenerated;
- a read timeout of an injected HTTP client is a timeout: no rotation, no cooldown.
"""

from __future__ import annotations

import httpx2
import pytest

from tavernkit.errors import GenerateTaskError
from tavernkit.models.profile import ProfileTimeouts
from tavernkit.providers.http import Timeouts
from tavernkit.providers.openai_chat import OpenAIChatAdapter
from tavernkit.providers.provider import Provider
from tavernkit.providers.request import ChatMessage, ChatPrompt
from tavernkit.providers.retry import RetryPolicy

from ._bench import ENV, SECRETS, MakeBench, make_bench
from ._upstream import error, openai_error, openai_json, openai_stream

__all__ = ["make_bench"]  # the fixtures of this module

ENV_A, ENV_B = ENV["TK_KEY_A"], ENV["TK_KEY_B"]


def _rate_limit(seconds: str = "90"):  # type: ignore[no-untyped-def]
    return openai_error(429, "rate_limit_error", "rate_limit_exceeded", retry_after=seconds)


# -- what rests a key, what a failed turn reports ----------------------------------------------


async def test_a_capacity_error_rests_the_keys_for_its_model_and_the_fallback_runs_on_them(
    make_bench: MakeBench,
) -> None:
    bench = await make_bench(keys=2, chain=True)
    bench.upstream.add(error(500), openai_error(529, "overloaded_error"), openai_stream(["Ok."]))
    out, sink = await bench.send()
    assert out.status == "completed", sink.errors
    assert bench.models == ["m1", "m1", "m2"]
    for key_id in bench.key_ids:
        left = await bench.cooldown(key_id)
        assert left is not None and 295 < left <= 300  # resting for m1 ...
        assert await bench.cooldown(key_id, "m2") is None  # ... and not for m2
    # the next turn starts on the fallback: every key rests for the primary's model
    bench.upstream.add(openai_stream(["Still ok."]))
    again, _ = await bench.send()
    assert again.text == "Still ok." and bench.models[-1] == "m2"


async def test_a_turn_that_rested_every_key_reports_the_last_upstream_error(
    make_bench: MakeBench,
) -> None:
    bench = await make_bench(keys=2)
    bench.upstream.add(_rate_limit(), _rate_limit())
    out, sink = await bench.send()
    assert out.status == "failed" and len(bench.upstream.requests) == 2
    assert out.error is not None
    assert (out.error.error_class, out.error.code) == ("rate_limit", "429")
    assert [e.error_class for e in sink.errors] == ["rate_limit"]
    assert out.result is not None
    assert [a.error_class for a in out.result.attempts] == ["rate_limit", "rate_limit"]
    # a turn that could send nothing at all says so
    again, _ = await bench.send()
    assert again.error is not None and again.error.error_class == "keys_cooling"
    assert len(bench.upstream.requests) == 2


# -- cooldowns outlive the turn for every kind of key ------------------------------------------


async def test_an_env_key_cooldown_outlives_the_turn(make_bench: MakeBench) -> None:
    bench = await make_bench(keys=0, env_keys=["TK_KEY_A", "TK_KEY_B"])
    bench.upstream.add(_rate_limit(), openai_stream(["First."]))
    out, _ = await bench.send()
    assert out.status == "completed" and bench.keys == [ENV_A, ENV_B]
    # a later turn of the same Tavern (another service: nothing kept in it) skips key A
    bench.upstream.add(openai_stream(["Second."]))
    again, _ = await bench.send(bench.service())
    assert again.text == "Second." and bench.keys[-1] == ENV_B
    # and so does a task of that Tavern
    bench.upstream.add(openai_json("Third."))
    task = await bench.context().generate_task([{"role": "user", "content": "Summarize."}])
    assert task.assistant_text == "Third." and bench.keys[-1] == ENV_B


async def test_a_mixed_pool_keeps_each_cooldown_where_it_lives(make_bench: MakeBench) -> None:
    bench = await make_bench(keys=1, env_keys=["TK_KEY_A"])
    bench.upstream.add(_rate_limit(), openai_stream(["Env key speaking."]))
    out, _ = await bench.send()
    assert out.status == "completed" and bench.keys == [SECRETS[0], ENV_A]
    # the stored key's cooldown is in the store: it holds for a new process too
    left = await bench.cooldown(bench.key_ids[0])
    assert left is not None and 85 < left <= 90
    await bench.tk.close()
    await bench.tk.open()
    bench.upstream.add(openai_stream(["Again."]))
    again, _ = await bench.send(bench.service())
    assert again.text == "Again." and bench.keys[-1] == ENV_A


# -- generate_task, generate_raw and quiet prompts run the chat plan ---------------------------


async def test_generate_task_rotates_to_a_ready_key_instead_of_waiting(
    make_bench: MakeBench,
) -> None:
    bench = await make_bench(keys=2)
    bench.upstream.add(_rate_limit("1"), openai_json("Task done."))
    task = await bench.context().generate_task([{"role": "user", "content": "Summarize."}])
    assert task.assistant_text == "Task done."
    assert bench.keys == list(SECRETS)  # rotated, not retried on the limited key
    left = await bench.cooldown(bench.key_ids[0])
    assert left is not None and 55 < left <= 60  # the 60 s floor over Retry-After: 1


async def test_generate_task_falls_back_along_the_chain(make_bench: MakeBench) -> None:
    bench = await make_bench(keys=2, chain=True)
    bench.upstream.add(error(500), error(503), openai_json("From the backup."))
    context = bench.context(retry=RetryPolicy(max_retries=0))
    task = await context.generate_task([{"role": "user", "content": "Summarize."}])
    assert task.assistant_text == "From the backup."
    assert bench.models == ["m1", "m1", "m2"] and bench.keys[:2] == list(SECRETS)


async def test_a_json_task_is_regenerated_never_stitched_after_a_cut(
    make_bench: MakeBench,
) -> None:
    bench = await make_bench(keys=2)
    bench.upstream.add(
        openai_stream(['{"tide": ', '"turn'], cut=True), openai_stream(['{"tide": "nine"}'])
    )
    schema = {"type": "object", "properties": {"tide": {"type": "string"}}}
    stream = bench.context().generate_task_stream(
        [{"role": "user", "content": "When?"}], json_schema=schema
    )
    task = await stream.result()
    assert task.json_data == {"tide": "nine"}
    assert [r.key for r in bench.upstream.requests] == list(SECRETS)
    # the second request asked afresh: no prefill of the cut document
    assert bench.upstream.requests[1].messages[-1]["role"] != "assistant"


async def test_generate_raw_and_quiet_prompts_rotate_keys(make_bench: MakeBench) -> None:
    bench = await make_bench(keys=2)
    bench.upstream.add(
        openai_error(401, "invalid_request_error", "invalid_api_key"),
        openai_json("Raw reply."),
        openai_json("Quiet reply."),
    )
    context = bench.context(retry=RetryPolicy(max_retries=0))
    assert await context.generate_raw("Say something.") == "Raw reply."
    assert await context.generate_quiet_prompt("Describe the sea.") == "Quiet reply."
    # key 1 is benched for its 401: both calls went through key 2
    assert bench.keys == [SECRETS[0], SECRETS[1], SECRETS[1]]


async def test_a_task_that_fails_everywhere_raises_the_upstream_error(
    make_bench: MakeBench,
) -> None:
    bench = await make_bench(keys=2)
    bench.upstream.add(_rate_limit(), _rate_limit())
    context = bench.context(retry=RetryPolicy(max_retries=0))
    with pytest.raises(GenerateTaskError) as caught:
        await context.generate_task([{"role": "user", "content": "Summarize."}])
    assert caught.value.code == "rate_limit"
    assert all(secret not in str(caught.value) for secret in SECRETS)


# -- timeouts ----------------------------------------------------------------------------------


async def test_an_injected_clients_read_timeout_is_a_timeout(make_bench: MakeBench) -> None:
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(5.0, read=0.2)) as client:
        # the profile's own idle limit is long: the client's read limit fires first
        slow = ProfileTimeouts(first_byte=30, idle=30)
        bench = await make_bench(keys=2, timeouts=slow, client=client)
        bench.upstream.add(openai_stream(["The tide turns. "], hang=True), openai_stream(["x"]))
        out, sink = await bench.send()
        assert out.status == "failed"
        assert out.error is not None and out.error.error_class == "timeout"
        assert bench.keys == [SECRETS[0]]  # no rotation
        assert [await bench.cooldown(k) for k in bench.key_ids] == [None, None]
        *_, reply = await bench.messages()
        assert reply.mes == sink.text == "The tide turns."


def test_profile_timeouts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="greater than 0"):
        ProfileTimeouts(idle=0)
    with pytest.raises(ValueError):
        ProfileTimeouts(first_byte=float("inf"))


async def test_the_profiles_connect_limit_rides_on_an_injected_client() -> None:
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=7.0)) as client:
        provider = Provider(
            "openai",
            "http://127.0.0.1:9/v1",
            OpenAIChatAdapter(),
            client=client,
            timeouts=Timeouts(connect=0.5, write=2.0),
        )
        prompt = ChatPrompt((ChatMessage("user", "hi"),))
        request, _ = provider._request(client, prompt, "m", True, None, None)
    limits = request.extensions["timeout"]
    # connect and write are the profile's; the read limit stays the client's own
    assert (limits["connect"], limits["write"], limits["read"]) == (0.5, 2.0, 7.0)
