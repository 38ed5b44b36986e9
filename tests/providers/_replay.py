"""Replay the shared wire corpus through a real Provider over httpx2.MockTransport.

Every corpus file is served as the HTTP response (status from MANIFEST.json), optionally cut
into pieces at the given offsets, and the result is normalized into plain JSON: the
accumulated completion, or the error class raised before any event.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2

from tavernkit.errors import ContextTooLong, ProviderError, StreamInterrupted
from tavernkit.providers.accumulator import Completion
from tavernkit.providers.anthropic import AnthropicAdapter
from tavernkit.providers.base import Adapter
from tavernkit.providers.gemini import GeminiAdapter
from tavernkit.providers.kobold import KoboldAdapter
from tavernkit.providers.llamacpp import LlamaCppAdapter
from tavernkit.providers.openai_chat import OpenAIChatAdapter
from tavernkit.providers.openai_responses import OpenAIResponsesAdapter
from tavernkit.providers.openai_text import OpenAITextAdapter
from tavernkit.providers.provider import Provider
from tavernkit.providers.request import ChatMessage, ChatPrompt, PromptRequest, TextPrompt

REPO_ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"


def wire_root() -> Path:
    env = os.environ.get("TAVERNKIT_WIRE_FIXTURES")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "fixtures" / "wire"


def manifest_entries() -> list[dict[str, Any]]:
    manifest = wire_root() / "MANIFEST.json"
    if not manifest.is_file():
        return []
    return list(json.loads(manifest.read_text(encoding="utf-8"))["entries"])


def adapter_for(entry: dict[str, Any]) -> Adapter | None:
    api = entry["api"]
    if api.startswith("chat.completions"):
        return OpenAIChatAdapter()
    if api.startswith("completions"):
        return OpenAITextAdapter()
    if api.startswith("responses"):
        return OpenAIResponsesAdapter()
    if api.startswith("messages"):
        return AnthropicAdapter()
    if "generateContent" in api or "GenerateContent" in api:
        return GeminiAdapter()
    if api.startswith("native /completion"):
        return LlamaCppAdapter()
    if api.startswith("kobold") and "version" not in api:
        return KoboldAdapter()
    return None


def request_for(adapter: Adapter) -> PromptRequest:
    if isinstance(adapter, (OpenAITextAdapter, KoboldAdapter, LlamaCppAdapter)):
        return TextPrompt("The capital of France is")
    return ChatPrompt((ChatMessage("user", "Hello"),))


def split(body: bytes, cuts: list[int] | None) -> list[bytes]:
    if not cuts:
        return [body]
    points = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
    return [body[a:b] for a, b in itertools.pairwise(points) if b > a]


def normalize_completion(c: Completion) -> dict[str, Any]:
    out: dict[str, Any] = {
        "text": c.text,
        "reasoning": c.reasoning,
        "refusal": c.refusal,
        "reasoning_blocks": [
            {
                "chars": len(b.text),
                "signature": bool(b.signature),
                "redacted": b.redacted,
                "data": bool(b.data),
                "format": b.format,
            }
            for b in c.reasoning_blocks
        ],
        "tool_calls": [
            {
                "index": t.index,
                "id": t.id,
                "name": t.name,
                "arguments": t.arguments,
                "truncated": t.truncated,
                "signature": bool(t.signature),
            }
            for t in c.tool_calls
        ],
        "finish_reason": c.finish_reason,
        "raw_finish_reason": c.raw_finish_reason,
        "usage": None
        if c.usage is None
        else {
            k: getattr(c.usage, k)
            for k in (
                "input_tokens",
                "output_tokens",
                "total_tokens",
                "cached_input_tokens",
                "cache_write_tokens",
                "reasoning_tokens",
            )
        },
        "response_id": c.response_id,
        "model": c.model,
        "error": None if c.error is None else normalize_error(c.error),
        "alternatives": [
            {"text": a.text, "finish_reason": a.finish_reason} for a in c.alternatives
        ],
    }
    return out


def normalize_error(e: ProviderError) -> dict[str, Any]:
    out: dict[str, Any] = {
        "class": type(e).__name__,
        "status": e.status,
        "code": e.code,
        "retry_after": e.retry_after,
        "retryable": e.retryable,
        "message": e.reason,
    }
    if isinstance(e, ContextTooLong):
        out["n_prompt"] = e.n_prompt
        out["n_ctx"] = e.n_ctx
    if isinstance(e, StreamInterrupted):
        out["delivered_chars"] = len(e.delivered_text)
        out["cause"] = type(e.cause).__name__ if e.cause else None
    return out


async def replay(
    entry: dict[str, Any], body: bytes, cuts: list[int] | None = None
) -> dict[str, Any]:
    adapter = adapter_for(entry)
    assert adapter is not None, entry["path"]
    status = int(entry["http_status"])
    streamed = entry["kind"] == "stream" or "stream" in Path(entry["path"]).name
    headers = dict(entry.get("response_headers") or {})
    headers.pop("content-length", None)
    headers.setdefault(
        "content-type",
        "text/event-stream" if entry["path"].endswith(".sse") else "application/json",
    )
    pieces = split(body, cuts)

    async def chunks() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, headers=headers, content=chunks())

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
        provider = Provider(
            name=entry["provider"],
            base_url="http://wire.test/v1",
            adapter=adapter,
            model="test-model",
            keys="sk-test-secret-key-0123456789",
            client=client,
        )
        try:
            completion = await provider.complete(request_for(adapter), stream=streamed)
        except ProviderError as exc:
            return {"raises": normalize_error(exc)}
    return normalize_completion(completion)


def snapshot_path(entry: dict[str, Any]) -> Path:
    return SNAPSHOTS / (entry["path"] + ".json")
