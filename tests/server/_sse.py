"""Reading server-sent events off a live response, keeping the raw bytes (the resume tests
compare streams byte for byte)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx

__all__ = ["Event", "events_of", "parse_events"]


@dataclass(frozen=True)
class Event:
    id: str | None
    type: str
    data: Any
    raw: bytes


def parse_events(raw: bytes) -> list[Event]:
    """Every event of a finished stream (keep-alive comments are dropped)."""
    return [_event(block) for block in raw.split(b"\n\n") if block and not block.startswith(b":")]


def _event(block: bytes) -> Event:
    fields: dict[str, str] = {}
    for line in block.decode().split("\n"):
        key, _, value = line.partition(": ")
        fields[key] = value
    data = fields.get("data", "")
    return Event(
        fields.get("id"),
        fields.get("event", "message"),
        data if data == "[DONE]" else json.loads(data),
        block + b"\n\n",
    )


async def events_of(response: httpx.Response) -> AsyncIterator[Event]:
    """The events of a streaming response as they arrive."""
    buffer = b""
    async for piece in response.aiter_bytes():
        buffer += piece
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            if block and not block.startswith(b":"):
                yield _event(block)
