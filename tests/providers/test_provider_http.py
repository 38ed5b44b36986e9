"""Provider over a mock transport: auth, timeouts, abort, cancellation, retry, broken streams."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import pytest

from tavernkit.errors import (
    MissingCredential,
    Overloaded,
    ProviderTimeout,
    QuotaExhausted,
    RateLimited,
    StreamInterrupted,
)
from tavernkit.generation.abort import AbortController
from tavernkit.providers.anthropic import AnthropicAdapter
from tavernkit.providers.events import Finish, ProviderErrorEvent, StreamEvent, TextDelta
from tavernkit.providers.gemini import GeminiAdapter
from tavernkit.providers.http import Timeouts
from tavernkit.providers.openai_chat import OpenAIChatAdapter
from tavernkit.providers.provider import Provider
from tavernkit.providers.request import ChatMessage, ChatPrompt
from tavernkit.providers.retry import RetryPolicy, call_with_retry

# real timeouts of a few tenths of a second: no collector pause may outlast one
pytestmark = pytest.mark.usefixtures("no_gc_pauses")

PROMPT = ChatPrompt((ChatMessage("user", "hi"),))


def chunk(text: str) -> bytes:
    return (
        b"data: "
        + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}).encode()
        + b"\n\n"
    )


def provider(handler: Callable[[httpx2.Request], httpx2.Response], **kw: object) -> Provider:
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    options: dict = {
        "name": "mock",
        "base_url": "http://mock/v1",
        "adapter": OpenAIChatAdapter(),
        "model": "m",
        "client": client,
    }
    options.update(kw)
    return Provider(**options)


async def collect(p: Provider, **kw: object) -> list[StreamEvent]:
    return [event async for event in p.stream(PROMPT, **kw)]


def sse_response(gen: AsyncIterator[bytes]) -> httpx2.Response:
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=gen)


async def test_auth_schemes_and_request_shape() -> None:
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(
            200, json={"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}
        )

    completion = await provider(handler, keys=lambda: "k1").complete(PROMPT)
    assert completion.text == "ok" and completion.finish_reason == "stop"
    assert seen[0].headers["authorization"] == "Bearer k1"
    assert seen[0].url.path == "/v1/chat/completions"
    assert json.loads(seen[0].content)["model"] == "m"

    await (
        provider(handler, keys="k2", auth="x-api-key", adapter=AnthropicAdapter())
        .stream(PROMPT, stream=False)
        .__anext__()
    )
    assert seen[-1].headers["x-api-key"] == "k2"
    assert seen[-1].headers["anthropic-version"] == "2023-06-01"

    gemini = provider(handler, keys="k3", auth="x-goog-api-key", adapter=GeminiAdapter())
    with pytest.raises(StopAsyncIteration):
        await gemini.stream(PROMPT, stream=True).__anext__()
    assert seen[-1].headers["x-goog-api-key"] == "k3"
    assert seen[-1].url.path == "/v1/models/m:streamGenerateContent"
    assert seen[-1].url.params["alt"] == "sse"


async def test_missing_key_names_provider_and_model_not_key() -> None:
    p = provider(lambda r: httpx2.Response(200), key_required=True)
    with pytest.raises(MissingCredential) as info:
        await collect(p)
    assert info.value.provider == "mock" and info.value.model == "m"


async def test_keep_alives_do_not_reset_the_idle_timer() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield chunk("Hel")
        while True:
            await asyncio.sleep(0.01)
            yield b": keep-alive\n\n"

    p = provider(lambda r: sse_response(body()), timeouts=Timeouts(first_byte=1, idle=0.2))
    events = await asyncio.wait_for(collect(p), 3)
    assert events[0] == TextDelta("Hel")
    error = events[-1]
    assert isinstance(error, ProviderErrorEvent) and isinstance(error.error, StreamInterrupted)
    assert isinstance(error.error.cause, ProviderTimeout) and error.error.cause.phase == "idle"


async def test_first_byte_timeout_is_raised_before_any_event() -> None:
    async def body() -> AsyncIterator[bytes]:
        while True:
            await asyncio.sleep(0.01)
            yield b": processing\n\n"

    p = provider(lambda r: sse_response(body()), timeouts=Timeouts(first_byte=0.2, idle=5))
    with pytest.raises(ProviderTimeout) as info:
        await asyncio.wait_for(collect(p), 3)
    assert info.value.phase == "first_byte" and info.value.retryable


async def test_abort_ends_the_stream_and_closes_the_connection() -> None:
    closed = asyncio.Event()
    abort = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        try:
            yield chunk("a")
            await asyncio.sleep(10)
            yield chunk("b")
        finally:
            closed.set()

    events: list[StreamEvent] = []
    async for event in provider(lambda r: sse_response(body())).stream(PROMPT, abort=abort):
        events.append(event)
        abort.set()
    assert events == [TextDelta("a"), Finish("aborted", None)]
    await asyncio.wait_for(closed.wait(), 1)


async def test_cancelling_the_task_closes_the_connection() -> None:
    closed = asyncio.Event()
    got_first = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        try:
            yield chunk("a")
            await asyncio.sleep(10)
        finally:
            closed.set()

    async def consume() -> None:
        async for _ in provider(lambda r: sse_response(body())).stream(PROMPT):
            got_first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_first.wait(), 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(closed.wait(), 1)


async def test_broken_connection_after_text_keeps_the_text() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield chunk("partial ")
        yield chunk("reply")
        raise httpx2.ReadError("connection reset")

    completion = await provider(lambda r: sse_response(body())).complete(PROMPT, stream=True)
    assert completion.text == "partial reply"
    assert isinstance(completion.error, StreamInterrupted)
    assert completion.error.delivered_text == "partial reply"


async def test_stream_without_terminator_is_interrupted() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield chunk("cut")

    completion = await provider(lambda r: sse_response(body())).complete(PROMPT, stream=True)
    assert completion.text == "cut"
    assert isinstance(completion.error, StreamInterrupted)
    with pytest.raises(StreamInterrupted):
        completion.raise_for_error()


async def test_retry_honours_retry_after_and_stops_on_quota() -> None:
    calls: list[int] = []
    answers = [
        httpx2.Response(
            429,
            headers={"retry-after-ms": "5"},
            json={"error": {"message": "slow", "code": "rate_limit_exceeded"}},
        ),
        httpx2.Response(
            200, json={"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}
        ),
    ]

    def handler(request: httpx2.Request) -> httpx2.Response:
        calls.append(1)
        return answers[len(calls) - 1]

    completion = await provider(handler).complete(PROMPT, retry=RetryPolicy())
    assert completion.text == "ok" and len(calls) == 2

    quota_calls: list[int] = []

    def quota(request: httpx2.Request) -> httpx2.Response:
        quota_calls.append(1)
        return httpx2.Response(
            429, json={"error": {"message": "pay", "code": "insufficient_quota"}}
        )

    with pytest.raises(QuotaExhausted):
        await provider(quota).complete(PROMPT, retry=RetryPolicy())
    assert len(quota_calls) == 1


async def test_x_should_retry_false_wins() -> None:
    calls: list[int] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        calls.append(1)
        return httpx2.Response(
            503, headers={"x-should-retry": "false"}, json={"error": {"message": "x"}}
        )

    with pytest.raises(Overloaded) as info:
        await provider(handler).complete(PROMPT, retry=RetryPolicy())
    assert info.value.should_retry is False
    assert len(calls) == 1


async def test_backoff_is_capped_and_jittered() -> None:
    import random

    policy = RetryPolicy(max_retries=5)
    error = RateLimited("x")
    delays = [policy.delay(error, n, random.Random(1)) for n in range(6)]
    assert all(0 < d <= 8.0 for d in delays) and delays[-1] > 4.0
    assert not policy.should_retry(RateLimited("x", retry_after=500), 0)
    slept: list[float] = []
    attempts: list[int] = []

    async def fail() -> None:
        attempts.append(1)
        raise RateLimited("x", retry_after=0.25)

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    with pytest.raises(RateLimited):
        await call_with_retry(fail, RetryPolicy(max_retries=2), sleep=sleep)
    assert len(attempts) == 3 and slept == [0.25, 0.25]


async def test_an_abort_stops_a_read_under_way_and_leaves_the_task_uncancelled() -> None:
    closed = asyncio.Event()
    controller = AbortController()

    async def body() -> AsyncIterator[bytes]:
        try:
            yield chunk("a")
            await asyncio.sleep(10)  # the read waits here when the abort comes
            yield chunk("b")
        finally:
            closed.set()

    loop = asyncio.get_running_loop()
    events: list[StreamEvent] = []
    p = provider(lambda r: sse_response(body()))
    async for event in p.stream(PROMPT, abort=controller.signal):
        events.append(event)
        if event == TextDelta("a"):
            loop.call_later(0.05, controller.abort)
    assert events == [TextDelta("a"), Finish("aborted", None)]
    await asyncio.wait_for(closed.wait(), 1)
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0  # the stop's cancellation taken back
    await asyncio.sleep(0)  # and no cancellation left pending for the caller's next await


async def test_a_silent_stream_times_out_mid_read() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield chunk("a")
        await asyncio.sleep(10)

    p = provider(lambda r: sse_response(body()), timeouts=Timeouts(first_byte=1, idle=0.1))
    events = await asyncio.wait_for(collect(p), 3)
    assert events[0] == TextDelta("a")
    error = events[-1]
    assert isinstance(error, ProviderErrorEvent) and isinstance(error.error, StreamInterrupted)
    assert isinstance(error.error.cause, ProviderTimeout) and error.error.cause.phase == "idle"
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


def test_a_chunk_costs_no_task() -> None:
    """The reads run in the caller's task: twenty pieces make no more tasks than one."""

    def tasks_made(pieces: int) -> int:
        async def body() -> AsyncIterator[bytes]:
            for n in range(pieces):
                await asyncio.sleep(0)
                yield chunk(str(n))

        async def read() -> None:
            async for _ in provider(lambda r: sse_response(body())).stream(
                PROMPT, abort=AbortController().signal
            ):
                pass

        made = 0

        def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
            nonlocal made
            made += 1
            return asyncio.Task(coro, loop=loop, **kw)

        loop = asyncio.new_event_loop()
        loop.set_task_factory(factory)
        try:
            loop.run_until_complete(read())
        finally:
            loop.close()
        return made

    assert tasks_made(20) == tasks_made(1)


async def test_an_outside_cancellation_during_a_read_still_cancels() -> None:
    started = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        yield chunk("a")
        started.set()
        await asyncio.sleep(10)

    async def consume() -> None:
        async for _ in provider(lambda r: sse_response(body())).stream(
            PROMPT, abort=AbortController().signal
        ):
            pass

    task = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), 1)
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
