"""A scripted OpenAI- and Anthropic-compatible upstream on 127.0.0.1, for fault injection.

Each request takes the next :class:`Reply` from the script (FIFO) and is recorded (path,
headers, JSON body), so a test says exactly what the upstream does on the 1st, 2nd, ... call
and then checks what the runner sent. Replies can be JSON bodies, error statuses with headers
(401, 429 + Retry-After, 500, 529), SSE streams (chunked, optionally cut mid-stream without
the terminating chunk), malformed SSE, in-stream errors, or a hang.

Bounded: a hang lasts until the server closes or ``max_hang`` seconds pass, every connection
has a deadline, and :meth:`ScriptedUpstream.close` stops everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    #: SSE events as raw bytes, sent as separate chunks
    events: list[bytes] | None = None
    #: close the connection after the events without finishing the chunked body
    cut: bool = False
    #: never answer (or, with events, stop sending after them and keep the socket open)
    hang: bool = False


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def key(self) -> str | None:
        auth = self.headers.get("authorization")
        if auth and auth.lower().startswith("bearer "):
            return auth[7:]
        return self.headers.get("x-api-key")

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []


class ScriptedUpstream:
    def __init__(self, *, max_hang: float = 10.0) -> None:
        self.script: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self.max_hang = max_hang
        self._server: asyncio.Server | None = None
        self._closing = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, *replies: Reply) -> ScriptedUpstream:
        self.script.extend(replies)
        return self

    async def start(self) -> ScriptedUpstream:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def close(self) -> None:
        self._closing.set()
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        try:
            async with asyncio.timeout(self.max_hang + 5):
                await self._serve(reader, writer)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._tasks.discard(task)  # type: ignore[arg-type]
            with contextlib.suppress(Exception):
                writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        raw = await reader.readexactly(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        self.requests.append(Recorded(method, path, headers, body))
        reply = self.script.popleft() if self.script else error(500, "script exhausted")
        if reply.hang and reply.events is None:
            await self._wait_hang()
            return
        if reply.events is None:
            out_headers = {"content-type": "application/json", **reply.headers}
            status_line = f"HTTP/1.1 {reply.status} X\r\n"
            header_text = "".join(f"{k}: {v}\r\n" for k, v in out_headers.items())
            writer.write(
                (
                    status_line
                    + header_text
                    + f"content-length: {len(reply.body)}\r\nconnection: close\r\n\r\n"
                ).encode()
                + reply.body
            )
            await writer.drain()
            return
        out_headers = {"content-type": "text/event-stream", **reply.headers}
        header_text = "".join(f"{k}: {v}\r\n" for k, v in out_headers.items())
        writer.write(
            (
                f"HTTP/1.1 {reply.status} OK\r\n{header_text}"
                "transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
            ).encode()
        )
        for event in reply.events:
            writer.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            await writer.drain()
            await asyncio.sleep(0)
        if reply.hang:
            await self._wait_hang()
            return
        if reply.cut:
            with contextlib.suppress(Exception):
                writer.transport.abort()
            return
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def _wait_hang(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), self.max_hang)


# -- reply builders ------------------------------------------------------------------------


def _sse(obj: Any, event: str | None = None) -> bytes:
    data = obj if isinstance(obj, str) else json.dumps(obj)
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {data}\n\n".encode()


def error(status: int, message: str = "failed", **headers: str) -> Reply:
    body = {"error": {"message": message, "type": "server_error", "code": None}}
    return Reply(status, dict(headers), json.dumps(body).encode())


def openai_error(
    status: int, etype: str, code: str | None = None, message: str = "nope", **headers: str
) -> Reply:
    body = {"error": {"message": message, "type": etype, "code": code}}
    return Reply(
        status, {k.replace("_", "-"): v for k, v in headers.items()}, json.dumps(body).encode()
    )


def anthropic_error(status: int, etype: str, message: str = "nope", **headers: str) -> Reply:
    body = {"type": "error", "error": {"type": etype, "message": message}}
    return Reply(
        status, {k.replace("_", "-"): v for k, v in headers.items()}, json.dumps(body).encode()
    )


def openai_json(text: str, finish: str = "stop", usage: dict[str, int] | None = None) -> Reply:
    body: dict[str, Any] = {
        "id": "cmpl-1",
        "model": "scripted",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
        ],
    }
    if usage:
        body["usage"] = usage
    return Reply(200, {}, json.dumps(body).encode())


def openai_stream(
    pieces: list[str],
    *,
    finish: str | None = "stop",
    cut: bool = False,
    hang: bool = False,
    usage: dict[str, int] | None = None,
    tool_calls: list[tuple[str, str, str]] | None = None,
) -> Reply:
    """A chat-completions stream; ``cut``/``hang`` end it early (no finish, no [DONE])."""
    events = [
        _sse(
            {
                "id": "c1",
                "model": "scripted",
                "choices": [{"index": 0, "delta": {"role": "assistant"}}],
            }
        )
    ]
    events += [
        _sse({"id": "c1", "choices": [{"index": 0, "delta": {"content": p}}]}) for p in pieces
    ]
    for n, (call_id, name, args) in enumerate(tool_calls or []):
        events.append(
            _sse(
                {
                    "id": "c1",
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {
                                        "index": n,
                                        "id": call_id,
                                        "type": "function",
                                        "function": {"name": name, "arguments": args},
                                    }
                                ]
                            },
                        }
                    ],
                }
            )
        )
    if not (cut or hang):
        if finish:
            events.append(
                _sse({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
            )
        if usage:
            events.append(_sse({"id": "c1", "choices": [], "usage": usage}))
        events.append(_sse("[DONE]"))
    return Reply(events=events, cut=cut, hang=hang)


def openai_stream_error(
    pieces: list[str], etype: str = "server_error", code: str | None = None
) -> Reply:
    """Text, then an error object inside the 200 stream (OpenRouter style)."""
    events = [
        _sse({"id": "c1", "choices": [{"index": 0, "delta": {"content": p}}]}) for p in pieces
    ]
    events.append(
        _sse({"error": {"message": "upstream failed mid-way", "type": etype, "code": code}})
    )
    return Reply(events=events)


def malformed_sse(pieces: list[str]) -> Reply:
    events = [
        _sse({"id": "c1", "choices": [{"index": 0, "delta": {"content": p}}]}) for p in pieces
    ]
    events.append(b"data: {this is not json\n\n")
    return Reply(events=events)


def anthropic_stream(
    pieces: list[str],
    *,
    cut: bool = False,
    error_type: str | None = None,
    stop_reason: str = "end_turn",
    usage: tuple[int, int] = (10, 5),
) -> Reply:
    events = [
        _sse(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "model": "claude-scripted",
                    "usage": {"input_tokens": usage[0], "output_tokens": 0},
                },
            },
            "message_start",
        ),
        _sse(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            "content_block_start",
        ),
    ]
    events += [
        _sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}},
            "content_block_delta",
        )
        for p in pieces
    ]
    if error_type:
        events.append(
            _sse({"type": "error", "error": {"type": error_type, "message": "boom"}}, "error")
        )
        return Reply(events=events)
    if not cut:
        events += [
            _sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
            _sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason},
                    "usage": {"output_tokens": usage[1]},
                },
                "message_delta",
            ),
            _sse({"type": "message_stop"}, "message_stop"),
        ]
    return Reply(events=events, cut=cut)


def text_stream(
    pieces: list[str], *, finish: str | None = "stop", cut: bool = False, hang: bool = False
) -> Reply:
    """An OpenAI-compatible text-completion stream (``choices[].text``); ``cut``/``hang`` end
    it early (no finish, no [DONE])."""
    events = [
        _sse({"id": "t1", "object": "text_completion", "choices": [{"index": 0, "text": p}]})
        for p in pieces
    ]
    if not (cut or hang):
        if finish:
            events.append(
                _sse({"id": "t1", "choices": [{"index": 0, "text": "", "finish_reason": finish}]})
            )
        events.append(_sse("[DONE]"))
    return Reply(events=events, cut=cut, hang=hang)


def hang() -> Reply:
    return Reply(hang=True)
