"""The embedded model's plumbing: request bodies (pure), thread defaults, engine parameters,
load failures, and a failure after output began (a real model whose stream breaks midway)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tavernkit.errors import BadRequest, ProviderError, StreamInterrupted
from tavernkit.providers import local_engine
from tavernkit.providers.events import ProviderErrorEvent, StreamEvent, TextDelta
from tavernkit.providers.local_call import JSON_GBNF, build_call
from tavernkit.providers.local_engine import LocalEngine, default_threads, local_model_missing
from tavernkit.providers.local_llama import LocalLlamaProvider
from tavernkit.providers.local_model import MissingDependency
from tavernkit.providers.profiles import resolve_model
from tavernkit.providers.request import (
    ChatMessage,
    ChatPrompt,
    ResponseFormat,
    Sampling,
    TextPrompt,
    ToolSpec,
    WireImagePart,
    WireTextPart,
)

from ._local import real_provider

PROMPT = ChatPrompt((ChatMessage("system", "Be brief."), ChatMessage("user", "hi")))


# -- request bodies ----------------------------------------------------------------------------


def test_unset_samplers_get_the_small_model_defaults() -> None:
    request = ChatPrompt(
        (ChatMessage("user", "hi"),), sampling=Sampling(repetition_penalty=1.0, temperature=1.2)
    )
    body = build_call(request).body
    # 1.0 is SillyTavern's "off" default: the 135M model loops without a penalty.
    assert body["repeat_penalty"] == 1.15
    assert body["temperature"] == 1.2  # set by the request: kept
    assert body["top_p"] == 0.9
    assert "seed" not in body  # none set: llama.cpp draws a random one per generation


def test_build_chat_call_maps_samplers_and_stop() -> None:
    request = ChatPrompt(
        (ChatMessage("user", "hi"),),
        sampling=Sampling(
            max_tokens=40,
            temperature=0.7,
            top_k=20,
            tfs=0.9,
            repetition_penalty=1.1,
            repetition_penalty_range=64,
            seed=5,
            logit_bias={"42": -100},
            backend={"mirostat_mode": 2, "mirostat_eta": 0.2},
        ),
        stop=("\nUser:",),
    )
    call = build_call(request)
    assert call.kind == "chat"
    assert call.body == {
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 40,
        "temperature": 0.7,
        "top_k": 20,
        "top_p": 0.9,  # the small model's default fills what the request left unset
        "repeat_penalty": 1.1,
        "repeat_last_n": 64,
        "seed": 5,
        "logit_bias": [[42, -100.0]],
        "mirostat": 2,
        "mirostat_eta": 0.2,
        "stop": ["\nUser:"],
    }
    assert call.downgrades == ("tail-free sampling (tfs) is not in llama.cpp: ignored",)


def test_build_call_images_are_downgraded_and_reported() -> None:
    message = ChatMessage("user", (WireTextPart("look"), WireImagePart(data="AAAA")))
    call = build_call(ChatPrompt((message,)), default_max_tokens=9)
    assert call.body["messages"][0]["content"].startswith("look\n[image omitted")
    assert call.body["max_tokens"] == 9
    assert call.downgrades == ("image replaced by a text placeholder",)


def test_build_call_json_constraints() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    chat = build_call(ChatPrompt(PROMPT.messages, response_format=ResponseFormat(schema)))
    assert chat.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"schema": schema},
    }
    any_chat = build_call(ChatPrompt(PROMPT.messages, response_format=ResponseFormat(None)))
    assert any_chat.body["response_format"] == {"type": "json_object"}
    text = build_call(TextPrompt("x", response_format=ResponseFormat(None)))
    assert (text.kind, text.body["grammar"]) == ("text", JSON_GBNF)
    typed = build_call(TextPrompt("x", response_format=ResponseFormat(schema)))
    assert typed.body["json_schema"] == schema
    raw = build_call(TextPrompt("x", grammar='root ::= "a"', response_format=ResponseFormat()))
    assert raw.body["grammar"] == 'root ::= "a"'
    assert "json_schema" not in raw.body
    assert raw.body["prompt"] == "x"


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


# -- threads and engine parameters -------------------------------------------------------------


def test_thread_defaults_follow_the_measurements() -> None:
    assert default_threads(1, {}, load=0.0) == (1, 1)
    # 2 threads collapse on a busy 2-core box, for generation and for a later turn's few new
    # prompt tokens alike (issue 40: 1-10 s for 20 tokens, against 0.2-0.9 s with 1)
    assert default_threads(2, {}, load=0.0) == (1, 1)
    assert default_threads(3, {}, load=0.0) == (1, 1)
    assert default_threads(8, {}, load=0.0) == (4, 4)
    assert default_threads(6, {}, load=0.0) == (3, 3)
    assert default_threads(32, {}, load=0.0) == (4, 4)
    assert default_threads(2, {"TAVERNKIT_LOCAL_THREADS": "3"}, load=9.0) == (3, 3)


def test_threads_stay_within_the_cores_the_load_leaves_free() -> None:
    # a thread without a core of its own stalls the others at every operation: at load 7-10
    # on 2 cores, 2 prompt threads ran at 12-17 tok/s, 1 thread at 43-44
    assert default_threads(8, {}, load=5.0) == (3, 3)
    assert default_threads(8, {}, load=7.9) == (1, 1)
    assert default_threads(16, {}, load=30.0) == (1, 1)


@pytest.mark.parametrize("raw", ["0", "-1", "many"])
def test_a_bad_thread_override_is_named(raw: str) -> None:
    with pytest.raises(ValueError, match="TAVERNKIT_LOCAL_THREADS"):
        default_threads(2, {"TAVERNKIT_LOCAL_THREADS": raw})


def test_engine_parameters_bound_memory_and_reuse_the_cache(tmp_path: Path) -> None:
    if local_model_missing() is not None:
        pytest.skip(str(local_model_missing()))
    params = LocalEngine(n_ctx=3000, slots=3, n_threads=1).params(tmp_path / "m.gguf")
    assert params.n_parallel == 3
    assert params.n_ctx == 9000  # llama.cpp splits it: 3,000 per slot
    assert params.cache_prompt
    assert params.cache_ram_mib == 128  # what a server holds after use beyond idle
    assert params.n_cache_reuse == 16  # moved chunks reused: a lorebook entry came or went
    assert params.slot_prompt_similarity == 0  # slots are routed: llama.cpp's choice is LRU
    assert params.cpuparams.n_threads == 1
    assert params.cpuparams_batch.n_threads == 1  # no more prompt threads than generation ones
    assert params.cpuparams.poll == 0
    assert params.cpuparams_batch.poll == 0


# -- load failures -----------------------------------------------------------------------------


async def test_missing_xllamacpp_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def missing(name: str) -> Any:
        raise ImportError(name)

    monkeypatch.setattr(local_engine.importlib, "import_module", missing)
    model = tmp_path / "model.gguf"  # a model file, so the missing engine is what fails
    model.write_bytes(b"GGUF")
    with pytest.raises(MissingDependency, match=r"tavernkit\[local\]") as info:
        [e async for e in LocalLlamaProvider(model_path=model).stream(PROMPT)]
    assert info.value.module == "xllamacpp"


async def test_a_file_that_is_no_gguf_is_a_typed_load_error(tmp_path: Path) -> None:
    if local_model_missing() is not None:
        pytest.skip(str(local_model_missing()))
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF not really")
    with pytest.raises(ProviderError, match=r"cannot load junk\.gguf"):
        await LocalLlamaProvider(model_path=junk).complete(PROMPT)
    with pytest.raises(ProviderError, match="no such file"):
        await LocalLlamaProvider(model_path=tmp_path / "absent.gguf").complete(PROMPT)


# -- a stream that breaks after output began ---------------------------------------------------


class BreaksMidway:
    """The real server, whose stream breaks off after ``after`` chunks (a decode failure
    cannot be provoked on demand in llama.cpp itself). xllamacpp swallows a callback's
    exception and ends the stream there, without a finish reason."""

    def __init__(self, server: Any, after: int) -> None:
        self.server = server
        self.after = after

    def handle_chat_completions(self, body: dict[str, Any], callback: Any) -> Any:
        seen = 0

        def forward(chunk: Any) -> bool:
            nonlocal seen
            seen += 1
            if seen > self.after:
                raise RuntimeError("decode failed")
            return bool(callback(chunk))

        return self.server.handle_chat_completions(body, forward)


async def test_failure_after_output_ends_the_stream() -> None:
    real = real_provider(seed=1)
    provider = real.with_options()
    assert provider.engine is not None
    provider.engine = local_engine.LocalEngine(loaded=BreaksMidway(real.load(), after=6))
    request = ChatPrompt(PROMPT.messages, sampling=Sampling(max_tokens=40))
    events: list[StreamEvent] = [e async for e in provider.stream(request)]
    assert any(isinstance(e, TextDelta) for e in events)
    last = events[-1]
    assert isinstance(last, ProviderErrorEvent)
    assert isinstance(last.error, StreamInterrupted)
    assert "without a finish reason" in str(last.error)
    early = real.with_options(engine=LocalEngine(loaded=BreaksMidway(real.load(), after=0)))
    with pytest.raises(ProviderError, match="without a finish reason"):
        await early.complete(request)
