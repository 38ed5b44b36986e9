"""A real MCP server for the tests, on the official SDK's ``MCPServer``.

Run as a script it serves over stdio (``python _mcp_server.py``: what a ``stdio``
registration starts); :func:`serve_http` serves the same tools over streamable HTTP on
127.0.0.1 with uvicorn, behind a bearer-token check, and records what it saw.

Tools: ``add(a, b)``, ``shout(text)``, ``fail(reason)`` (always an error result),
``tally()`` (counts its own calls: what replay must not raise), ``whoami()`` (the
``MCP_TEST_TOKEN`` environment variable a stdio server was given), and the prose checker
``lint(text)`` (one finding per line: a repeated word, an exclamation, a banned phrase).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

BANNED = ("shivers down", "a testament to")


@dataclass
class Seen:
    """What the HTTP server saw: each request's Authorization header, and tool calls."""

    authorizations: list[str | None] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def lint_findings(text: str) -> list[str]:
    findings = []
    for match in re.finditer(r"\b(\w+)\s+\1\b", text, flags=re.IGNORECASE):
        findings.append(f"repeated word: {match.group(1)!r}")
    if "!" in text:
        findings.append("exclamation mark")
    for phrase in BANNED:
        if phrase in text.lower():
            findings.append(f"cliche: {phrase!r}")
    return findings


def build(seen: Seen | None = None, *, lint_output: str = "plain") -> MCPServer:
    server = MCPServer("tavernkit-test-tools")
    record = seen or Seen()

    def note(name: str, args: dict[str, Any]) -> None:
        record.calls.append((name, args))

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        note("add", {"a": a, "b": b})
        return a + b

    @server.tool()
    def shout(text: str) -> str:
        """Upper-case a text."""
        note("shout", {"text": text})
        return text.upper()

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails, with the reason."""
        note("fail", {"reason": reason})
        raise ToolError(f"refused: {reason}")  # a ToolError's message reaches the client

    @server.tool()
    def tally() -> int:
        """How many times tally was called."""
        note("tally", {})
        return sum(1 for name, _ in record.calls if name == "tally")

    @server.tool()
    def whoami() -> str:
        """The token this server was started with."""
        return os.environ.get("MCP_TEST_TOKEN", "<none>")

    @server.tool()
    def lint(text: str) -> str:
        """Check prose against the house rules; one finding per line."""
        note("lint", {"text": text})
        findings = lint_findings(text)
        if lint_output == "empty":
            return ""
        if lint_output == "fail":
            raise ToolError("the linter crashed")
        if lint_output == "huge":
            return "x" * 100_000
        return "\n".join(findings) if findings else "no findings"

    return server


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def serve_http(
    token: str | None = None, *, lint_output: str = "plain"
) -> AsyncIterator[tuple[str, Seen]]:
    """The tools over streamable HTTP on loopback; yields ``(url, seen)``. With ``token``,
    a request without ``Authorization: Bearer <token>`` gets 401."""
    import uvicorn

    seen = Seen()
    app = build(seen, lint_output=lint_output).streamable_http_app()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            auth = headers.get(b"authorization")
            seen.authorizations.append(auth.decode() if auth else None)
            if token is not None and auth != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    port = _free_port()
    config = uvicorn.Config(guarded, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if serving.done():
                serving.result()
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}/mcp", seen
    finally:
        server.should_exit = True
        await serving


if __name__ == "__main__":
    build(lint_output=os.environ.get("MCP_TEST_LINT", "plain")).run("stdio")
