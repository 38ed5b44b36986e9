"""A live round trip: the same GGUF served by llama.cpp's own HTTP server (``xllamacpp``'s,
listening on 127.0.0.1 in a child process), reached through the ordinary HTTP ``Provider``
with the OpenAI adapters.

Skipped (with the reason) when xllamacpp or the GGUF is absent. With
``TAVERNKIT_RECORD_LOCAL=1`` it also (re)records the raw bodies under ``recorded/``, which
test_local_recorded.py replays on every machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tavernkit.providers.events import Finish, ProviderErrorEvent, StreamEvent, TextDelta
from tavernkit.providers.local_engine import local_model_missing
from tavernkit.providers.local_model import find_model_path
from tavernkit.providers.openai_chat import OpenAIChatAdapter
from tavernkit.providers.openai_text import OpenAITextAdapter
from tavernkit.providers.provider import Provider
from tavernkit.providers.request import ChatMessage, ChatPrompt, Sampling, TextPrompt

RECORDED = Path(__file__).resolve().parent / "recorded"
MESSAGES = (
    ChatMessage("system", "You are Mira, a cheerful tavern keeper. Answer in one sentence."),
    ChatMessage("user", "What is on the menu tonight?"),
)
#: the child: load the GGUF with llama.cpp's HTTP server on a free loopback port, print the
#: address, serve until stdin closes
SERVE = """
import sys, xllamacpp
p = xllamacpp.CommonParams()
p.model.path = sys.argv[1]
p.model_alias = "smollm2"
p.n_ctx = 2048
p.cpuparams.n_threads = 1
p.verbosity = -1
p.hostnames = ["127.0.0.1"]
p.port = 0
server = xllamacpp.Server(p)
print(server.listening_address, flush=True)
sys.stdin.read()
"""


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    reason = local_model_missing()
    if reason is not None:
        pytest.skip(reason)
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(find_model_path())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().strip()
        if not address.startswith("http://127.0.0.1:"):
            pytest.fail(f"xllamacpp's server did not start (exit {proc.poll()}): {address!r}")
        assert httpx2.get(f"{address}/v1/models", timeout=30).status_code == 200
        yield f"{address}/v1"
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()


def chat_provider(base_url: str) -> Provider:
    return Provider("llama.cpp", base_url, OpenAIChatAdapter(), model="smollm2", auth="none")


def chat(max_tokens: int = 24, **kw: Any) -> ChatPrompt:
    return ChatPrompt(
        MESSAGES, sampling=Sampling(max_tokens=max_tokens, temperature=0.8, seed=7), **kw
    )


async def test_chat_stream_round_trip(server: str) -> None:
    events: list[StreamEvent] = [e async for e in chat_provider(server).stream(chat())]
    assert not any(isinstance(e, ProviderErrorEvent) for e in events), events
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text.strip()
    assert sum(isinstance(e, TextDelta) for e in events) > 3
    finish = [e for e in events if isinstance(e, Finish)]
    assert finish
    assert finish[-1].reason in ("stop", "length")


async def test_chat_non_stream_round_trip(server: str) -> None:
    result = await chat_provider(server).complete(chat(), stream=False)
    result.raise_for_error()
    assert result.text.strip()
    assert result.finish_reason in ("stop", "length")
    assert result.usage is not None
    assert result.usage.output_tokens


async def test_text_completion_round_trip(server: str) -> None:
    provider = Provider("llama.cpp", server, OpenAITextAdapter(), model="smollm2", auth="none")
    prompt = TextPrompt(
        "<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\nOnce upon a time",
        sampling=Sampling(max_tokens=16, seed=1),
        stop=("<|im_end|>",),
    )
    result = await provider.complete(prompt, stream=True)
    result.raise_for_error()
    assert result.text.strip()


def test_the_server_renders_the_ggufs_chat_template(server: str) -> None:
    root = server.removesuffix("/v1")
    body = {"messages": [{"role": m.role, "content": m.content} for m in MESSAGES]}
    rendered = httpx2.post(f"{root}/apply-template", json=body, timeout=30).json()["prompt"]
    assert rendered == (
        f"<|im_start|>system\n{MESSAGES[0].content}<|im_end|>\n"
        f"<|im_start|>user\n{MESSAGES[1].content}<|im_end|>\n<|im_start|>assistant\n"
    )


async def test_abort_then_the_server_still_answers(server: str) -> None:
    provider = chat_provider(server)
    abort = asyncio.Event()
    events: list[StreamEvent] = []
    async for event in provider.stream(chat(max_tokens=400), abort=abort):
        events.append(event)
        if isinstance(event, TextDelta):
            abort.set()
    assert events[-1] == Finish("aborted")
    result = await provider.complete(chat(max_tokens=4))
    assert result.text


@pytest.mark.skipif(
    os.environ.get("TAVERNKIT_RECORD_LOCAL") != "1", reason="set TAVERNKIT_RECORD_LOCAL=1"
)
async def test_record_fixtures(server: str) -> None:
    """Write the raw request/response pairs that test_local_recorded.py replays."""
    adapter = OpenAIChatAdapter()
    cases: list[tuple[str, Any, bool, str]] = [
        ("llamacpp_server_chat_stream.sse", chat(), True, "/chat/completions"),
        ("llamacpp_server_chat.json", chat(), False, "/chat/completions"),
        (
            "llamacpp_server_chat_stop.sse",
            chat(max_tokens=40, stop=(".",)),
            True,
            "/chat/completions",
        ),
    ]
    entries: list[dict[str, Any]] = []
    RECORDED.mkdir(exist_ok=True)
    async with httpx2.AsyncClient(timeout=120) as client:
        for name, request, stream, path in cases:
            wire = adapter.build_request(request, model="smollm2", stream=stream)
            assert wire.path == path
            response = await client.post(server + wire.path, json=wire.body)
            assert response.status_code == 200, response.text
            (RECORDED / name).write_bytes(response.content)
            entries.append(
                {
                    "path": name,
                    "api": "chat.completions" + (" stream" if stream else ""),
                    "http_status": response.status_code,
                    "content_type": response.headers.get("content-type", ""),
                    "request": wire.body,
                }
            )
    manifest = {
        "source": "llama.cpp's HTTP server (xllamacpp 2026.10.11549, Server with port=0) "
        "serving SmolLM2-135M-Instruct.Q4_1.gguf on 127.0.0.1; recorded by "
        "tests/providers/test_local_server.py with TAVERNKIT_RECORD_LOCAL=1",
        "entries": entries,
    }
    (RECORDED / "MANIFEST.json").write_text(
        json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
