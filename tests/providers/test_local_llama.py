"""The embedded model for real: SmolLM2-135M through xllamacpp, offline.

Skipped (with the reason) when the ``local`` extra or the GGUF is absent. Assertions are on
structure and on self-consistency (same seed, same text), not on golden text: another CPU or
build may sample differently.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import jsonschema
import pytest

from tavernkit.errors import BadRequest, ContextTooLong
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
from tavernkit.providers.request import (
    ChatMessage,
    ChatPrompt,
    ResponseFormat,
    Sampling,
    TextPrompt,
)

from ._local import real_provider

MESSAGES = (
    ChatMessage("system", "You are Mira, a cheerful tavern keeper. Answer in one sentence."),
    ChatMessage("user", "What is on the menu tonight?"),
)
#: ~1,500 tokens of prompt: several seconds of evaluation on this kind of machine
LONG_SYSTEM = "The old lighthouse keeper wrote in his log every night. " * 130


@pytest.fixture(scope="module")
def base() -> LocalLlamaProvider:
    return real_provider(seed=7)


def chat(max_tokens: int = 32, seed: int | None = 7, **kw: Any) -> ChatPrompt:
    return ChatPrompt(
        MESSAGES, sampling=Sampling(max_tokens=max_tokens, temperature=0.8, seed=seed), **kw
    )


async def collect(provider: LocalLlamaProvider, request: Any, **kw: Any) -> list[StreamEvent]:
    return [event async for event in provider.stream(request, **kw)]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def fresh(text: str) -> str:
    """``text`` behind a unique first line, so no slot has any of it cached."""
    return f"Session {uuid.uuid4()}.\n{text}"


async def drained(provider: LocalLlamaProvider, within: float = 60) -> bool:
    deadline = time.monotonic() + within
    while provider.draining() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return provider.draining() == 0


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
    assert isinstance(usage, Usage)  # llama.cpp's own counts
    assert usage.input_tokens is not None
    assert usage.input_tokens > 20
    assert usage.output_tokens is not None
    assert 0 < usage.output_tokens <= 32
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    again = await collect(base, chat())
    assert text_of(again) == text  # same seed, same reply
    other = await collect(base, chat(seed=12345))
    assert text_of(other) != text or len(text) < 5


async def test_without_a_seed_each_generation_samples_anew() -> None:
    provider = real_provider(seed=None)
    replies = {(await provider.complete(chat(seed=None, max_tokens=24))).text for _ in range(3)}
    assert len(replies) >= 2, replies  # swipes and regenerate differ


async def test_the_ggufs_chat_template_renders_the_chat(base: LocalLlamaProvider) -> None:
    """A chat request equals a raw completion of the same messages in SmolLM2's own ChatML
    template, with greedy sampling."""
    greedy = Sampling(max_tokens=16, temperature=0.0, seed=1)
    as_chat = await base.complete(ChatPrompt(MESSAGES, sampling=greedy))
    rendered = "".join(f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in MESSAGES)
    as_text = await base.complete(TextPrompt(rendered + "<|im_start|>assistant\n", sampling=greedy))
    assert as_chat.text.strip()
    assert as_chat.text == as_text.text


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


async def test_abort_during_generation_stops_the_decode(base: LocalLlamaProvider) -> None:
    abort = asyncio.Event()
    events: list[StreamEvent] = []
    async for event in base.stream(chat(max_tokens=1500), abort=abort):
        events.append(event)
        if isinstance(event, TextDelta) and len(events) >= 4:
            abort.set()
    assert events[-1] == Finish("aborted")
    assert sum(isinstance(e, TextDelta) for e in events) < 10
    assert await drained(base, 10)  # the callback's True ended llama.cpp's decode


async def test_abort_during_prompt_evaluation_returns_at_once() -> None:
    """Control comes back within 0.5 s while llama.cpp is still evaluating a long prompt;
    nothing of the abandoned decode is streamed, and the model is usable again after."""
    provider = real_provider(seed=3)
    request = ChatPrompt(
        (ChatMessage("system", fresh(LONG_SYSTEM)), ChatMessage("user", "Tell me more.")),
        sampling=Sampling(max_tokens=64),
    )
    abort = asyncio.Event()
    asyncio.get_running_loop().call_later(0.3, abort.set)
    events = await collect(provider, request, abort=abort)
    assert events == [Finish("aborted")]
    assert abort.is_set()
    assert provider.draining() == 1  # llama.cpp was still evaluating when we returned
    assert await drained(provider)  # it stopped at its next prompt batch
    result = await provider.complete(chat(max_tokens=4))
    assert result.text


async def test_abort_returns_within_half_a_second() -> None:
    provider = real_provider(seed=3)
    request = ChatPrompt(
        (ChatMessage("system", fresh(LONG_SYSTEM)), ChatMessage("user", "Go on.")),
        sampling=Sampling(max_tokens=64),
    )
    abort = asyncio.Event()
    stream = provider.stream(request, abort=abort)
    first = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0.3)  # llama.cpp is now evaluating the prompt
    set_at = time.perf_counter()
    abort.set()
    assert await first == Finish("aborted")
    assert time.perf_counter() - set_at < 0.5
    await stream.aclose()
    assert await drained(provider)


async def test_task_cancel_frees_the_model(base: LocalLlamaProvider) -> None:
    got_text = asyncio.Event()

    async def consume() -> None:
        async for event in base.stream(chat(max_tokens=1500)):
            if isinstance(event, TextDelta):
                got_text.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_text.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await drained(base, 10)
    result = await base.complete(chat(max_tokens=4))
    assert result.text


async def test_next_turn_reuses_the_kv_cache_of_its_own_chat(base: LocalLlamaProvider) -> None:
    """Turn 2 of a chat evaluates only what follows turn 1's prompt, even after another chat
    used the model in between (each active chat keeps a slot)."""
    greedy = Sampling(max_tokens=8, temperature=0.0, seed=1)
    chat_a = [ChatMessage("system", fresh(LONG_SYSTEM[:1500])), ChatMessage("user", "Hello!")]
    chat_b = [ChatMessage("system", fresh("You are a pirate. " * 40)), ChatMessage("user", "Ahoy!")]
    first_a = await base.complete(ChatPrompt(tuple(chat_a), sampling=greedy))
    await base.complete(ChatPrompt(tuple(chat_b), sampling=greedy))
    chat_a += [ChatMessage("assistant", first_a.text), ChatMessage("user", "And then?")]
    second_a = await base.complete(ChatPrompt(tuple(chat_a), sampling=greedy))
    assert first_a.usage is not None
    assert second_a.usage is not None
    assert first_a.usage.input_tokens is not None
    assert second_a.usage.cached_input_tokens is not None
    assert second_a.usage.cached_input_tokens >= first_a.usage.input_tokens - 8


async def test_two_chats_stream_at_once_from_one_model(base: LocalLlamaProvider) -> None:
    started: dict[str, float] = {}
    ended: dict[str, float] = {}

    async def run(label: str, request: ChatPrompt) -> str:
        parts: list[str] = []
        async for event in base.stream(request):
            if isinstance(event, TextDelta):
                started.setdefault(label, time.perf_counter())
                parts.append(event.text)
        ended[label] = time.perf_counter()
        return "".join(parts)

    a, b = await asyncio.gather(run("a", chat(max_tokens=40)), run("b", chat(max_tokens=40)))
    assert a.strip()
    assert b.strip()
    # both produced text before either finished: two slots, not one after the other
    assert max(started.values()) < min(ended.values())


async def test_a_prompt_over_the_context_is_raised_typed() -> None:
    provider = real_provider(n_ctx=512)
    request = ChatPrompt((ChatMessage("user", LONG_SYSTEM),), sampling=Sampling(max_tokens=4))
    with pytest.raises(ContextTooLong) as info:
        await collect(provider, request)
    assert info.value.n_ctx == 512
    assert info.value.n_prompt is not None
    assert info.value.n_prompt > 512


async def test_a_broken_grammar_is_a_bad_request(base: LocalLlamaProvider) -> None:
    with pytest.raises(BadRequest, match="grammar"):
        await base.complete(TextPrompt("hi", grammar="root ::= ((", sampling=Sampling(seed=1)))


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
    jsonschema.validate(json.loads(result.text), SCHEMA)


async def test_text_family_json_schema_validates(base: LocalLlamaProvider) -> None:
    result = await base.complete(
        TextPrompt(
            "<|im_start|>user\nDescribe a dish as JSON.<|im_end|>\n<|im_start|>assistant\n",
            sampling=Sampling(max_tokens=120, seed=4),
            response_format=ResponseFormat(SCHEMA),
        )
    )
    assert result.finish_reason == "stop", result.text
    jsonschema.validate(json.loads(result.text), SCHEMA)


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


async def test_a_gbnf_grammar_constrains_the_text(base: LocalLlamaProvider) -> None:
    for seed in (1, 2, 3):
        result = await base.complete(
            TextPrompt(
                "Is bread food? Answer: ",
                grammar='root ::= ("yes" | "no")',
                sampling=Sampling(max_tokens=4, seed=seed),
            )
        )
        assert result.text in ("yes", "no")


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
    assert provider.engine is base.engine  # shares the loaded model
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


@pytest.mark.parametrize("shifted", [0, 64])
async def test_a_dropped_early_message_and_shifted_reuse(shifted: int) -> None:
    """A message that drops out early in the prompt (a lorebook entry no longer active) ends
    exact prefix reuse there; ``shifted_reuse`` also reuses the chunk after it."""
    provider = real_provider(seed=1, slots=1, shifted_reuse=shifted)
    greedy = Sampling(max_tokens=4, temperature=0.0)
    main = ChatMessage("system", "Write Wren's next reply in a chat with the visitor.")
    entry = ChatMessage("system", "The lamp is a Fresnel lens turned by clockwork. " * 6)
    card = ChatMessage("system", LONG_SYSTEM[:1800])
    main = ChatMessage("system", fresh(main.content))
    with_entry = (main, entry, card, ChatMessage("user", "Hello!"))
    without = (main, card, ChatMessage("user", "Hello!"))
    await provider.complete(ChatPrompt(with_entry, sampling=greedy))
    second = await provider.complete(ChatPrompt(without, sampling=greedy))
    assert second.usage is not None
    assert second.usage.input_tokens is not None
    assert second.usage.cached_input_tokens is not None
    reused = second.usage.cached_input_tokens / second.usage.input_tokens
    if shifted:
        assert reused > 0.8
    else:
        assert reused < 0.2


async def test_a_chat_coming_back_after_others_finds_its_cache(base: LocalLlamaProvider) -> None:
    """More chats than slots: a slot handed to another chat saves its cache to the bounded RAM
    cache first, so chat A, back after B, C and D used both slots, re-evaluates almost nothing."""
    greedy = Sampling(max_tokens=4, temperature=0.0)
    chats = {k: ChatMessage("system", fresh(f"You are {k}, a sailor. " * 40)) for k in "ABCD"}
    usages = []
    for k in "ABCDA":
        result = await base.complete(
            ChatPrompt((chats[k], ChatMessage("user", "Hi")), sampling=greedy)
        )
        usages.append(result.usage)
    first, back = usages[0], usages[-1]
    assert first is not None
    assert back is not None
    assert first.cached_input_tokens is not None
    assert first.cached_input_tokens < 8  # at most the template's opening tokens
    assert back.input_tokens is not None
    assert back.cached_input_tokens is not None
    assert back.cached_input_tokens >= back.input_tokens - 4
