"""The scripted OpenAI-compatible server of tests/generation, plus replies that hang.

A :class:`HangReply` streams its first ``hang_after`` pieces and then sends nothing more until
the server is released or closed: the shape of a provider that stalls mid-reply, which is what
the busy, stop and crash tests need (a reply that is still running when they act).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from generation._scripted_server import Recorded, Reply, ScriptedServer

__all__ = ["HangReply", "HangingServer", "Recorded", "Reply"]


@dataclass
class HangReply(Reply):
    hang_after: int = 1


class HangingServer(ScriptedServer):
    def __init__(self, replies: Any = None) -> None:
        super().__init__(replies)
        self.release = asyncio.Event()
        self.hanging = asyncio.Event()

    async def __aexit__(self, *exc: object) -> None:
        self.release.set()
        await super().__aexit__(*exc)

    async def _stream(
        self,
        writer: asyncio.StreamWriter,
        reply: Reply,
        anthropic: bool,
        body: dict[str, Any],
        *shape: str,
    ) -> None:
        if not isinstance(reply, HangReply):
            await super()._stream(writer, reply, anthropic, body, *shape)
            return
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
        )
        frames = self._openai_frames(reply)
        head = 2 if reply.reasoning else 1
        for frame in frames[: head + reply.hang_after]:
            if frame is not None:
                writer.write(frame)
                await writer.drain()
        self.hanging.set()
        await self.release.wait()
        for frame in frames[head + reply.hang_after :]:
            if frame is None:
                return
            writer.write(frame)
            await writer.drain()
