"""LocalLlamaProvider's plumbing against a scripted stand-in for ``llama_cpp.Llama``: request
mapping, the worker thread, abort and cancellation, errors before and after the first event.
Runs without llama-cpp-python; test_local_llama.py runs the real model."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tavernkit.errors import BadRequest, ContextTooLong, StreamInterrupted
from tavernkit.models.templates import ReasoningTemplate
from tavernkit.providers import local_llama
from tavernkit.providers.events import (
    Finish,
    ProviderErrorEvent,
    ReasoningDelta,
    ResponseMeta,
    StreamEvent,
    TextDelta,
    Usage,
)
from tavernkit.providers.local_llama import LocalLlamaProvider, build_call
from tavernkit.providers.local_model import MissingDependency
from tavernkit.providers.profiles import resolve_model
from tavernkit.providers.request import (
    ChatMessage,
    ChatPrompt,
    ImagePart,
    ResponseFormat,
    Sampling,
    TextPart,
    TextPrompt,
    ToolSpec,
)

PROMPT = ChatPrompt((ChatMessage("system", "Be brief."), ChatMessage("user", "hi")))


class FakeLlama:
    """Yields ``pieces`` in llama-cpp-python's chunk shapes, one per ``delay`` seconds."""

    metadata: dict[str, str] = {}  # noqa: RUF012

    def __init__(
        self,
        pieces: list[str],
        *,
        delay: float = 0.0,
        fail_at: int | None = None,
        error: Exception | None = None,
        finish: str = "stop",
    ) -> None:
        self.pieces = pieces
        self.delay = delay
        self.fail_at = fail_at
        self.error = error or RuntimeError("decode failed")
        self.finish = finish
        self.calls: list[dict[str, Any]] = []
        self.produced = 0
        self.closed = threading.Event()

    def _chunks(self, chat: bool) -> Iterator[dict[str, Any]]:
        try:
            if chat:
                yield {"id": "chatcmpl-1", "choices": [{"delta": {"role": "assistant"}}]}
            for i, piece in enumerate(self.pieces):
                if self.fail_at == i:
                    raise self.error
                time.sleep(self.delay)
                self.produced += 1
                body = {"delta": {"content": piece}} if chat else {"text": piece}
                yield {"id": "cmpl-1", "choices": [{**body, "finish_reason": None}]}
            end = {"delta": {}} if chat else {"text": ""}
            yield {"id": "cmpl-1", "choices": [{**end, "finish_reason": self.finish}]}
        finally:
            self.closed.set()

    def create_chat_completion(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.calls.append(kwargs)
        return self._chunks(chat=True)

    def create_completion(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.calls.append(kwargs)
        return self._chunks(chat=False)

    def tokenize(self, data: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return list(range(len(data.split()) + (1 if add_bos else 0)))


async def collect(provider: LocalLlamaProvider, request: Any, **kw: Any) -> list[StreamEvent]:
    return [event async for event in provider.stream(request, **kw)]


# -- request mapping ---------------------------------------------------------------------------


def test_unset_samplers_get_the_small_model_defaults() -> None:
    request = ChatPrompt(
        (ChatMessage("user", "hi"),), sampling=Sampling(repetition_penalty=1.0, temperature=1.2)
    )
    kwargs = build_call(request).kwargs
    # 1.0 is SillyTavern's "off" default: the 135M model loops without a penalty.
    assert kwargs["repeat_penalty"] == 1.15
    assert kwargs["temperature"] == 1.2  # set by the request: kept
    assert kwargs["top_p"] == 0.9


def test_build_chat_call_maps_samplers_and_stop() -> None:
    request = ChatPrompt(
        (ChatMessage("user", "hi"),),
        sampling=Sampling(
            max_tokens=40,
            temperature=0.7,
            top_k=20,
            tfs=0.9,
            repetition_penalty=1.1,
            seed=5,
            logit_bias={"42": -100},
            backend={"mirostat_mode": 2},
        ),
        stop=("\nUser:",),
    )
    call = build_call(request)
    assert call.kind == "chat"
    assert call.kwargs == {
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 40,
        "temperature": 0.7,
        "top_k": 20,
        "tfs_z": 0.9,
        "top_p": 0.9,  # the small model's default fills what the request left unset
        "repeat_penalty": 1.1,
        "seed": 5,
        "logit_bias": {42: -100.0},
        "mirostat_mode": 2,
        "stop": ["\nUser:"],
    }
    assert call.grammar is None


def test_build_call_images_are_downgraded_and_reported() -> None:
    message = ChatMessage("user", (TextPart("look"), ImagePart(data="AAAA")))
    call = build_call(ChatPrompt((message,)), default_max_tokens=9)
    assert call.kwargs["messages"][0]["content"].startswith("look\n[image omitted")
    assert call.kwargs["max_tokens"] == 9
    assert call.downgrades == ("image replaced by a text placeholder",)


def test_build_call_json_grammars() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    chat = build_call(ChatPrompt(PROMPT.messages, response_format=ResponseFormat(schema)))
    assert chat.grammar is not None
    assert chat.grammar[0] == "json_schema"
    text = build_call(TextPrompt("x", response_format=ResponseFormat(None)))
    assert (text.kind, text.grammar) == ("text", ("json", ""))
    raw = build_call(TextPrompt("x", grammar='root ::= "a"', response_format=ResponseFormat()))
    assert raw.grammar == ("gbnf", 'root ::= "a"')
    assert raw.kwargs["prompt"] == "x"


@pytest.mark.parametrize(
    "request_",
    [
        ChatPrompt(PROMPT.messages, tools=(ToolSpec("roll"),)),
        ChatPrompt(PROMPT.messages, sampling=Sampling(n=2)),
        ChatPrompt(PROMPT.messages, sampling=Sampling(logit_bias={"hello": 1.0})),
    ],
)
def test_build_call_refuses_what_it_cannot_do(request_: ChatPrompt) -> None:
    with pytest.raises(BadRequest):
        build_call(request_)


def test_local_profile() -> None:
    profile = resolve_model("local", "smollm2-135m-instruct")
    assert profile.native_json_schema
    assert profile.reasoning_format == "tags"


# -- streaming ---------------------------------------------------------------------------------


async def test_streams_events_with_seed_and_usage() -> None:
    fake = FakeLlama(["Hello", " there", "."])
    provider = LocalLlamaProvider(llama=fake, seed=11)
    events = await collect(provider, PROMPT)
    assert events == [
        ResponseMeta("chatcmpl-1", "smollm2-135m-instruct"),
        TextDelta("Hello"),
        TextDelta(" there"),
        TextDelta("."),
        Finish("stop", "stop"),
        Usage(input_tokens=None, output_tokens=2, total_tokens=None),
    ]
    assert fake.calls[0]["seed"] == 11  # the provider's seed when the request sets none
    assert fake.calls[0]["stream"] is True


async def test_text_family_and_complete() -> None:
    fake = FakeLlama(["Once", " more"], finish="length")
    provider = LocalLlamaProvider(llama=fake)
    result = await provider.complete(TextPrompt("Tell me a story", sampling=Sampling(seed=3)))
    assert (result.text, result.finish_reason) == ("Once more", "length")
    assert result.usage is not None
    assert result.usage.input_tokens == 5  # four words + BOS in the fake tokenizer
    assert fake.calls[0]["prompt"] == "Tell me a story"
    assert fake.calls[0]["seed"] == 3


async def test_reasoning_tags_are_split_when_a_template_is_set() -> None:
    fake = FakeLlama(["<think>", "hm", "</think>", "\nYes"])
    provider = LocalLlamaProvider(llama=fake, reasoning_template=ReasoningTemplate())
    events = await collect(provider, PROMPT)
    assert [e for e in events if isinstance(e, TextDelta | ReasoningDelta)] == [
        ReasoningDelta("hm"),
        TextDelta("Yes"),
    ]
    plain = LocalLlamaProvider(llama=FakeLlama(["<think>x</think>y"]))
    assert TextDelta("<think>x</think>y") in await collect(plain, PROMPT)


async def test_abort_stops_generation_promptly() -> None:
    fake = FakeLlama([f"t{i} " for i in range(500)], delay=0.005)
    provider = LocalLlamaProvider(llama=fake)
    abort = asyncio.Event()
    events: list[StreamEvent] = []
    async for event in provider.stream(PROMPT, abort=abort):
        events.append(event)
        if sum(isinstance(e, TextDelta) for e in events) == 3:
            abort.set()
    assert events[-1] == Finish("aborted")
    assert fake.closed.is_set()  # the worker left the generator before stream() returned
    assert fake.produced < 20
    assert not provider._lock.locked()


async def test_preset_abort_generates_nothing() -> None:
    fake = FakeLlama(["x"])
    abort = asyncio.Event()
    abort.set()
    assert await collect(LocalLlamaProvider(llama=fake), PROMPT, abort=abort) == [Finish("aborted")]
    assert fake.calls == []


async def test_task_cancellation_stops_the_worker() -> None:
    fake = FakeLlama([f"t{i} " for i in range(500)], delay=0.005)
    provider = LocalLlamaProvider(llama=fake)
    first = asyncio.Event()

    async def consume() -> None:
        async for event in provider.stream(PROMPT):
            if isinstance(event, TextDelta):
                first.set()

    task = asyncio.create_task(consume())
    await first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.to_thread(fake.closed.wait, 2)
    assert fake.closed.is_set()
    assert fake.produced < 50
    # the model is free again for the next request
    fake2 = FakeLlama(["ok"])
    result = await provider.with_options(llama=fake2).complete(PROMPT)
    assert result.text == "ok"


async def test_failure_before_output_is_raised() -> None:
    provider = LocalLlamaProvider(
        llama=FakeLlama(
            ["a"],
            fail_at=0,
            error=ValueError("Requested tokens (9000) exceed context window of 4096"),
        )
    )
    with pytest.raises(ContextTooLong) as info:
        await collect(provider, PROMPT)
    assert (info.value.n_prompt, info.value.n_ctx) == (9000, 4096)


async def test_failure_after_output_ends_the_stream() -> None:
    provider = LocalLlamaProvider(llama=FakeLlama(["a", "b", "c"], fail_at=2))
    events = await collect(provider, PROMPT)
    assert events[1:3] == [TextDelta("a"), TextDelta("b")]
    last = events[-1]
    assert isinstance(last, ProviderErrorEvent)
    assert isinstance(last.error, StreamInterrupted)
    result = await LocalLlamaProvider(llama=FakeLlama(["a", "b"], fail_at=1)).complete(PROMPT)
    assert result.text == "a"
    assert isinstance(result.error, StreamInterrupted)


async def test_missing_llama_cpp_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> Any:
        raise ImportError(name)

    monkeypatch.setattr(local_llama.importlib, "import_module", missing)
    with pytest.raises(MissingDependency, match=r"tavernkit\[local\]"):
        await collect(LocalLlamaProvider(), PROMPT)


async def test_closing_the_stream_stops_the_worker_through_the_splitter() -> None:
    fake = FakeLlama(["<think>", *[f"t{i} " for i in range(500)]], delay=0.005)
    provider = LocalLlamaProvider(llama=fake, reasoning_template=ReasoningTemplate())
    stream = provider.stream(PROMPT)
    async for event in stream:
        if isinstance(event, ReasoningDelta):
            break
    await stream.aclose()
    assert fake.closed.is_set()
    assert fake.produced < 50
    assert not provider._lock.locked()
