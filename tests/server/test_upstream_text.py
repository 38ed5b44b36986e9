"""Nothing an upstream writes comes back (issue 34, finding 3): a model API and an MCP server
that answer errors whose text carries a marker; the marker appears in no answer of the server
(the profile test, ``/tasks``, the facade, a turn's events, an MCP tool listing) and in no log
record (at DEBUG, tracebacks included). Clients get the error's class and code (and HTTP
status), as the README promises. (A summary made now is a task: its error is answered
through the server's error handler, which shows a task's error the same way.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator

import pytest

from chat.conftest import stock_world
from generation._scripted_server import Reply, ScriptedServer

from ._live import LiveServer
from ._sse import parse_events
from .conftest import Users, with_loopback

MARKER = "UPSTREAM-SAYS-7f3a9c"


def _no_marker(texts: list[str], caplog: pytest.LogCaptureFixture) -> None:
    for text in texts:
        assert MARKER not in text, text
    for record in caplog.records:
        shown = logging.Formatter().format(record)  # the message, with any traceback
        assert MARKER not in shown, shown


async def test_a_model_apis_error_text_is_not_passed_on(
    local: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    error = {"error": {"message": f"{MARKER}: your key sk-x is wrong", "code": MARKER}}
    replies = [
        Reply(status=400, error=error),
        Reply(status=401, error=error),
        Reply(status=500, error={"detail": MARKER}),
    ]
    async with ScriptedServer(replies) as upstream:
        await stock_world(local.state.tavern, upstream.base_url)
        chat = (await local.state.tavern.chats.new_chat("Mira")).id
        client = local.client()
        answers: list[str] = []
        for reply in replies:
            upstream.script(reply)
            check = await client.post("/ui/profiles/scripted/test")
            assert check.status_code == 200 and check.json()["ok"] is False
            assert f"HTTP {reply.status}" in check.json()["message"], check.text
            messages = [{"role": "user", "content": "hi"}]
            task = await client.post(
                "/tasks", json={"task_messages": messages, "api_preset_name": "scripted"}
            )
            assert task.status_code >= 400
            facade = await client.post(
                "/v1/chat/completions", json={"model": "profile/scripted", "messages": messages}
            )
            assert facade.status_code >= 400
            started = await client.post(f"/chats/{chat}/turns", json={"text": "Hi"})
            events = await client.get(started.json()["events"])
            assert parse_events(events.content)[-1].data["status"] == "failed"
            summary = await client.post(f"/chats/{chat}/summary/now")
            assert summary.status_code >= 400, summary.text
            answers += [check.text, task.text, facade.text, events.text, summary.text]
        await client.aclose()
    assert len(upstream.requests) >= 15  # every route did ask the upstream
    _no_marker(answers, caplog)


@contextlib.asynccontextmanager
async def broken_mcp() -> AsyncIterator[str]:
    """An MCP endpoint that answers each POST by its path: ``/garbled`` a 200 JSON body that
    is no JSON-RPC message, ``/error`` a JSON-RPC error, ``/shaped`` a result of the wrong
    shape, ``/html`` a 502 page; every one quoting :data:`MARKER`."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode()
            method, path, _ = head.split(" ", 2)
            length = 0
            for line in head.split("\r\n"):
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            body = json.loads(await reader.readexactly(length)) if length else {}
            status, kind, payload = 405, "text/plain", b"no"
            if method == "POST":
                ident = body.get("id")
                kind = "application/json"
                if path.startswith("/garbled"):
                    status, payload = 200, json.dumps({"leak": MARKER}).encode()
                elif path.startswith("/error"):
                    error = {"code": -32000, "message": MARKER, "data": MARKER}
                    message = {"jsonrpc": "2.0", "id": ident, "error": error}
                    status, payload = 400, json.dumps(message).encode()
                elif path.startswith("/shaped"):
                    message = {"jsonrpc": "2.0", "id": ident, "result": {"leak": MARKER}}
                    status, payload = 200, json.dumps(message).encode()
                else:
                    status, kind, payload = 502, "text/html", f"<h1>{MARKER}</h1>".encode()
                if ident is None:  # a notification
                    status, payload = 202, b""
            writer.write(
                f"HTTP/1.1 {status} X\r\ncontent-type: {kind}\r\n"
                f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


@with_loopback
async def test_an_mcp_servers_error_text_is_not_passed_on(
    users: Users, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ann = users.ann
    answers: list[str] = []
    async with broken_mcp() as base:
        for path in ("garbled", "error", "shaped", "html"):
            body = {"name": path, "url": f"{base}/{path}", "token": "mcp-token-0123", "timeout": 5}
            assert (await ann.post("/mcp/servers", json=body)).status_code == 201
            r = await ann.get(f"/mcp/servers/{path}/tools")
            assert r.status_code == 502, r.text
            error = r.json()["error"]
            assert error["type"] == "ToolSourceUnavailable" and path in error["message"]
            answers.append(r.text)
    _no_marker(answers, caplog)


async def test_an_mcp_error_names_its_class_and_code(users: Users) -> None:
    """What a client learns instead: the class, and the JSON-RPC code or HTTP status."""
    async with broken_mcp() as base:
        admin = users.admin  # an admin is not policed: the loopback server is reached
        body = {"name": "error", "url": f"{base}/error", "timeout": 5}
        assert (await admin.post("/mcp/servers", json=body)).status_code == 201
        r = await admin.get("/mcp/servers/error/tools")
        assert r.status_code == 502
        assert "(code -32000)" in r.json()["error"]["message"], r.text
