"""A scripted OpenAI- and Anthropic-compatible server on 127.0.0.1, for end-to-end tests.

Each request takes the next :class:`Reply` from the script (the last one repeats) and gets it
in the API's own shape, JSON or SSE as the request asked: ``/v1/chat/completions`` speaks
OpenAI, ``/v1/messages`` speaks Anthropic, ``/v1/completions`` speaks the OpenAI-compatible
text-completion API (text-generation-webui, vLLM, llama.cpp's OpenAI endpoint). Every
request is recorded (path, headers, JSON body). Real sockets and real HTTP framing, so the
provider layer is exercised whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Self


@dataclass
class Reply:
    text: str = ""
    tool_calls: Sequence[tuple[str, Any]] = ()
    reasoning: str = ""
    usage: tuple[int, int] | None = (12, 5)
    finish_reason: str | None = None
    status: int = 200
    error: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: stream pieces of ``text`` (default: words)
    chunks: Sequence[str] | None = None
    #: stream: drop the connection after this many text pieces (no terminator)
    break_after: int | None = None
    #: seconds to wait before answering
    delay: float = 0.0
    #: stream: seconds between frames (so concurrent streams interleave)
    pace: float = 0.0


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def _pieces(reply: Reply) -> list[str]:
    if reply.chunks is not None:
        return list(reply.chunks)
    words = reply.text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words) if w or i == 0]


def _args_text(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args)


def _sse(payload: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return f"{head}data: {data}\n\n".encode()


class ScriptedServer:
    def __init__(self, replies: Sequence[Reply] | None = None, *, host: str = "127.0.0.1") -> None:
        self.host = host
        self.replies: list[Reply] = list(replies or [Reply(text="ok")])
        self.requests: list[Recorded] = []
        self._server: asyncio.Server | None = None
        self.base_url = ""
        #: ``/embeddings``: the vector of each input text (None: no embeddings endpoint);
        #: ``embed_status`` other than 200 answers every embeddings request with that error
        self.embed: Callable[[str], list[float]] | None = None
        self.embed_status = 200

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._handle, self.host, 0)
        port = self._server.sockets[0].getsockname()[1]
        self.base_url = f"http://{self.host}:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    def script(self, *replies: Reply) -> None:
        self.replies = list(replies)

    def _next(self) -> Reply:
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = (await reader.readline()).decode()
            if not line:  # a connection opened ahead of a request that never came
                return
            _, path, _ = line.split(" ", 2)
            headers: dict[str, str] = {}
            while True:
                raw = (await reader.readline()).decode().strip()
                if not raw:
                    break
                key, _, value = raw.partition(":")
                headers[key.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            body = json.loads(await reader.readexactly(length)) if length else {}
            self.requests.append(Recorded(path.split("?")[0], headers, body))
            if path.split("?")[0].endswith("/embeddings") and self.embed is not None:
                await self._embeddings(writer, body)
                return
            reply = self._next()
            if reply.delay:
                await asyncio.sleep(reply.delay)
            anthropic = path.startswith("/v1/messages")
            text = path.split("?")[0].endswith("/completions") and "/chat/" not in path
            if reply.status != 200:
                await self._json(writer, reply.status, reply.error or {"error": "x"}, reply)
            elif body.get("stream"):
                await self._stream(writer, reply, anthropic, body, *(["text"] if text else []))
            else:
                if anthropic:
                    data = self._anthropic(reply, body)
                else:
                    data = self._text(reply, body) if text else self._openai(reply, body)
                await self._json(writer, 200, data, reply)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()
                await writer.wait_closed()

    async def _json(
        self, writer: asyncio.StreamWriter, status: int, data: Any, reply: Reply
    ) -> None:
        payload = json.dumps(data).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in reply.headers.items())
        writer.write(
            f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n"
            f"content-length: {len(payload)}\r\n{extra}connection: close\r\n\r\n".encode()
            + payload
        )
        await writer.drain()

    async def _embeddings(self, writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
        assert self.embed is not None
        if self.embed_status != 200:
            error = {"error": {"message": "embedding failed"}}
            await self._json(writer, self.embed_status, error, Reply())
            return
        texts = body.get("input") or []
        data = [
            {"object": "embedding", "index": i, "embedding": self.embed(t)}
            for i, t in enumerate([texts] if isinstance(texts, str) else texts)
        ]
        await self._json(writer, 200, {"object": "list", "data": data}, Reply())

    # -- OpenAI ------------------------------------------------------------------------------

    def _finish(self, reply: Reply, anthropic: bool) -> str:
        if reply.finish_reason:
            return reply.finish_reason
        if anthropic:
            return "tool_use" if reply.tool_calls else "end_turn"
        return "tool_calls" if reply.tool_calls else "stop"

    def _openai(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": _args_text(args)},
                }
                for i, (name, args) in enumerate(reply.tool_calls)
            ]
        data: dict[str, Any] = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": body.get("model", "scripted"),
            "choices": [
                {"index": 0, "message": message, "finish_reason": self._finish(reply, False)}
            ],
        }
        if reply.usage is not None:
            p, c = reply.usage
            data["usage"] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
        return data

    def _text(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": "cmpl-1",
            "object": "text_completion",
            "model": body.get("model", "scripted"),
            "choices": [
                {"index": 0, "text": reply.text, "finish_reason": self._finish(reply, False)}
            ],
        }
        if reply.usage is not None:
            p, c = reply.usage
            data["usage"] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
        return data

    def _anthropic(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.reasoning:
            content.append({"type": "thinking", "thinking": reply.reasoning, "signature": "sig"})
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for i, (name, args) in enumerate(reply.tool_calls):
            value = json.loads(args) if isinstance(args, str) else args
            content.append({"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": value})
        p, c = reply.usage or (0, 0)
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "scripted"),
            "content": content,
            "stop_reason": self._finish(reply, True),
            "usage": {"input_tokens": p, "output_tokens": c},
        }

    async def _stream(
        self,
        writer: asyncio.StreamWriter,
        reply: Reply,
        anthropic: bool,
        body: dict[str, Any],
        *shape: str,
    ) -> None:
        """``shape`` is ``("text",)`` for a text-completion stream (positional and optional,
        so subclasses that override this with the four-argument form keep working)."""
        text = "text" in shape
        extra = "".join(f"{k}: {v}\r\n" for k, v in reply.headers.items())
        writer.write(
            f"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n{extra}"
            "connection: close\r\n\r\n".encode()
        )
        if anthropic:
            frames = self._anthropic_frames(reply, body)
        else:
            frames = self._text_frames(reply) if text else self._openai_frames(reply)
        for frame in frames:
            if frame is None:  # the scripted break
                await writer.drain()
                return
            writer.write(frame)
            await writer.drain()
            await asyncio.sleep(reply.pace)

    def _text_frames(self, reply: Reply) -> list[bytes | None]:
        def chunk(piece: str, finish: str | None = None) -> bytes:
            choice = {"index": 0, "text": piece, "finish_reason": finish}
            return _sse({"id": "cmpl-1", "object": "text_completion", "choices": [choice]})

        frames: list[bytes | None] = []
        for n, piece in enumerate(_pieces(reply)):
            if reply.break_after is not None and n >= reply.break_after:
                frames.append(None)
                return frames
            if piece:
                frames.append(chunk(piece))
        frames.append(chunk("", self._finish(reply, False)))
        frames.append(_sse("[DONE]"))
        return frames

    def _openai_frames(self, reply: Reply) -> list[bytes | None]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            return _sse(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion.chunk",
                    "model": "scripted",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                }
            )

        frames: list[bytes | None] = [chunk({"role": "assistant", "content": ""})]
        if reply.reasoning:
            frames.append(chunk({"reasoning_content": reply.reasoning}))
        for n, piece in enumerate(_pieces(reply)):
            if reply.break_after is not None and n >= reply.break_after:
                frames.append(None)
                return frames
            if piece:
                frames.append(chunk({"content": piece}))
        for i, (name, args) in enumerate(reply.tool_calls):
            text = _args_text(args)
            head = {"index": i, "id": f"call_{i}", "type": "function"}
            frames.append(
                chunk({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]})
            )
            for part in (text[: len(text) // 2], text[len(text) // 2 :]):
                frames.append(
                    chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]})
                )
        frames.append(chunk({}, self._finish(reply, False)))
        if reply.usage is not None:
            p, c = reply.usage
            usage = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
            frames.append(_sse({"id": "chatcmpl-1", "choices": [], "usage": usage}))
        frames.append(_sse("[DONE]"))
        return frames

    def _anthropic_frames(self, reply: Reply, body: dict[str, Any]) -> list[bytes | None]:
        p, c = reply.usage or (0, 0)
        start = {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": body.get("model", "scripted"),
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": p, "output_tokens": 1},
            },
        }
        frames: list[bytes | None] = [_sse(start, "message_start")]
        index = 0
        if reply.reasoning:
            frames += [
                _sse(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "thinking", "thinking": ""},
                    },
                    "content_block_start",
                ),
                _sse(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "thinking_delta", "thinking": reply.reasoning},
                    },
                    "content_block_delta",
                ),
                _sse({"type": "content_block_stop", "index": index}, "content_block_stop"),
            ]
            index += 1
        if reply.text:
            frames.append(
                _sse(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                    "content_block_start",
                )
            )
            for n, piece in enumerate(_pieces(reply)):
                if reply.break_after is not None and n >= reply.break_after:
                    frames.append(None)
                    return frames
                frames.append(
                    _sse(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": piece},
                        },
                        "content_block_delta",
                    )
                )
            frames.append(
                _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
            )
            index += 1
        for i, (name, args) in enumerate(reply.tool_calls):
            frames += [
                _sse(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {
                            "type": "tool_use",
                            "id": f"toolu_{i}",
                            "name": name,
                            "input": {},
                        },
                    },
                    "content_block_start",
                ),
                _sse(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": _args_text(args)},
                    },
                    "content_block_delta",
                ),
                _sse({"type": "content_block_stop", "index": index}, "content_block_stop"),
            ]
            index += 1
        frames += [
            _sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": self._finish(reply, True)},
                    "usage": {"output_tokens": c},
                },
                "message_delta",
            ),
            _sse({"type": "message_stop"}, "message_stop"),
        ]
        return frames
