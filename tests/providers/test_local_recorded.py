"""Replay of our own recordings from llama.cpp's HTTP server (xllamacpp's; see
recorded/MANIFEST.json): the bodies are served through httpx2's mock transport, cut at several
chunk sizes, and the accumulated completion must equal what the raw JSON says, read
independently here."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tavernkit.providers.openai_chat import OpenAIChatAdapter
from tavernkit.providers.provider import Provider
from tavernkit.providers.request import ChatMessage, ChatPrompt, Sampling

RECORDED = Path(__file__).resolve().parent / "recorded"


def entries() -> list[dict[str, Any]]:
    manifest = RECORDED / "MANIFEST.json"
    if not manifest.is_file():
        return []
    return list(json.loads(manifest.read_text(encoding="utf-8"))["entries"])


def expected(entry: dict[str, Any], body: bytes) -> dict[str, Any]:
    """Text, finish reason and output tokens straight from the recorded JSON."""
    if not entry["path"].endswith(".sse"):
        obj = json.loads(body)
        choice = obj["choices"][0]
        return {
            "text": choice["message"]["content"],
            "finish": choice["finish_reason"],
            "output_tokens": obj["usage"]["completion_tokens"],
        }
    text, finish, output = "", None, None
    for line in body.decode().splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        obj = json.loads(line[6:])
        for choice in obj.get("choices") or []:
            text += (choice.get("delta") or {}).get("content") or ""
            finish = choice.get("finish_reason") or finish
        if obj.get("usage"):
            output = obj["usage"]["completion_tokens"]
    return {"text": text, "finish": finish, "output_tokens": output}


@pytest.mark.parametrize("entry", entries(), ids=lambda e: e["path"])
@pytest.mark.parametrize("size", [1, 7, 64, 1 << 20])
async def test_replay_recorded(entry: dict[str, Any], size: int) -> None:
    body = (RECORDED / entry["path"]).read_bytes()
    pieces = [body[i : i + size] for i in range(0, len(body), size)]

    async def chunks() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent = json.loads(request.content)
        assert sent["messages"] == entry["request"]["messages"]
        return httpx2.Response(
            200, headers={"content-type": entry["content_type"]}, content=chunks()
        )

    request = entry["request"]
    prompt = ChatPrompt(
        tuple(ChatMessage(m["role"], m["content"]) for m in request["messages"]),
        sampling=Sampling(max_tokens=request.get("max_tokens")),
        stop=tuple(request.get("stop") or ()),
    )
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
        provider = Provider(
            "llama.cpp", "http://local.test/v1", OpenAIChatAdapter(), auth="none", client=client
        )
        result = await provider.complete(prompt, stream=entry["path"].endswith(".sse"))
    result.raise_for_error()
    want = expected(entry, body)
    assert result.text == want["text"]
    assert result.text.strip()
    assert result.raw_finish_reason == want["finish"]
    if want["output_tokens"] is not None:
        assert result.usage is not None
        assert result.usage.output_tokens == want["output_tokens"]
    for stop in request.get("stop") or ():
        assert stop not in result.text


def test_recordings_present() -> None:
    assert {e["path"] for e in entries()} >= {
        "llamacpp_server_chat_stream.sse",
        "llamacpp_server_chat.json",
    }
