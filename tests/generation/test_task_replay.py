"""generate_task over the shared wire corpus (replayed through httpx2.MockTransport): for every
chat-family recording the task result agrees with the provider layer's own reading, and every
failure is a GenerateTaskError whose code comes from the typed provider error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tavernkit import GenerateTaskError
from tavernkit.errors import ProviderError
from tavernkit.generation.profiles import resolve_connection
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.providers.request import ChatMessage, ChatPrompt
from tavernkit.task_errors import task_error_from

from ._helpers import context, mock_client, profile, setup_tavern


def _root() -> Path:
    import os

    env = os.environ.get("TAVERNKIT_WIRE_FIXTURES")
    return (
        Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "wire"
    )


def _entries() -> list[dict[str, Any]]:
    manifest = _root() / "MANIFEST.json"
    if not manifest.is_file():
        return []
    entries = json.loads(manifest.read_text(encoding="utf-8"))["entries"]
    return [e for e in entries if e["api"] in ("chat.completions", "messages")]


ENTRIES = _entries()


def _handler(entry: dict[str, Any]) -> Any:
    body = (_root() / entry["path"]).read_bytes()
    content_type = entry.get("content_type") or (
        "text/event-stream" if entry["kind"] == "stream" else "application/json"
    )

    def handle(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            entry["http_status"], content=body, headers={"content-type": content_type}
        )

    return handle


@pytest.mark.skipif(not ENTRIES, reason="wire corpus not found (TAVERNKIT_WIRE_FIXTURES)")
@pytest.mark.parametrize("entry", ENTRIES, ids=[e["path"] for e in ENTRIES])
async def test_task_agrees_with_the_provider_layer(tmp_path: Path, entry: dict[str, Any]) -> None:
    anthropic = entry["api"] == "messages"
    item = profile(
        "http://mock" if anthropic else "http://mock/v1",
        source="claude" if anthropic else "custom",
        model="claude-sonnet-4-5" if anthropic else "m",
    )
    stream = entry["kind"] == "stream"
    client = mock_client(_handler(entry))

    # the provider layer's own reading of the same bytes
    connection = await resolve_connection(item, client=client)
    expected: Any
    try:
        expected = await connection.provider.complete(
            ChatPrompt((ChatMessage("user", "hi"),)), stream=stream
        )
    except ProviderError as exc:
        expected = exc

    tk, _ = await setup_tavern(
        tmp_path, [item], preset=ChatCompletionPreset.create(stream_openai=stream)
    )
    try:
        ctx = context(tk, client=client)
        if isinstance(expected, ProviderError):
            with pytest.raises(GenerateTaskError) as info:
                await ctx.generate_task([{"role": "user", "content": "hi"}])
            assert info.value.code == task_error_from(expected).code
            return
        if expected.error is not None:
            with pytest.raises(GenerateTaskError) as info:
                await ctx.generate_task([{"role": "user", "content": "hi"}])
            assert info.value.code == task_error_from(expected.error).code
            assert info.value.details["delivered_text"] == expected.text
            return
        empty = not expected.text.strip() or (
            expected.usage is not None and expected.usage.output_tokens == 0
        )
        if empty:
            with pytest.raises(GenerateTaskError) as info:
                await ctx.generate_task([{"role": "user", "content": "hi"}])
            assert info.value.code == "no_response"
            return
        result = await ctx.generate_task([{"role": "user", "content": "hi"}])
    finally:
        await tk.close()
    assert result.assistant_text == expected.text
    assert result.reasoning == (expected.reasoning or None)
    assert result.finish_reason == (expected.finish_reason or "stop")
    assert result.raw is not None and result.raw.text == expected.text
