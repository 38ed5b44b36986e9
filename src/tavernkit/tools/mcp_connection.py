"""One live connection to an MCP server, with the official ``mcp`` SDK (extra ``mcp``).

The SDK's client lives in anyio task groups that must be entered and left by one task, while
tavernkit calls tools from whichever task runs a chat turn. So each connection has an owner
task: it opens the transport (``stdio``: the registration's command as a subprocess with a
minimal environment; ``http``: streamable HTTP with a bearer token), initializes the session,
and waits until :meth:`McpConnection.close`; every other task sends its requests through the
session the owner opened. A server that cannot be started, reached or initialized within the
registration's timeout is a :class:`~tavernkit.errors.ToolSourceError` naming the
registration and the failure's class and code (an HTTP status, a JSON-RPC error code), never
its credential and never text the server sent: a user's MCP URL may point at anything, and
its answers must not come back through our errors or logs. The SDK's own log lines are cut to
their fixed words for the same reason (:func:`_quiet_sdk_logs`).

An ``http`` registration's requests go through the owner's egress policy
(:mod:`tavernkit.egress`); a refused destination raises
:class:`~tavernkit.errors.EgressRefused` itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx2

from tavernkit.egress import EgressPolicy, egress_client
from tavernkit.errors import EgressRefused, ToolSourceError, ToolSourceUnavailable
from tavernkit.models.mcp import McpServer

__all__ = ["McpConnection", "McpTool", "call_result_text"]

#: the SDK's loggers ("client" is its session's own name)
_SDK_LOGGERS = (
    "mcp.client.streamable_http",
    "mcp.client.sse",
    "mcp.client.stdio",
    "mcp.client.client",
    "mcp.client.caching",
    "mcp.client.auth.oauth2",
    "mcp.shared.dispatcher",
    "mcp.shared.jsonrpc_dispatcher",
    "mcp.shared.direct_dispatcher",
    "mcp.shared.tool_name_validation",
    "client",
)


class _QuietSdk(logging.Filter):
    """The SDK's records without what a server sent: DEBUG ones (every JSON-RPC message, with
    drafts, tool arguments and rule reports) dropped; the others keep their fixed words (a
    formatted message up to its first colon, a template's placeholders as ``…``) and an
    exception's class, never its text or traceback (a parse error quotes the body)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= logging.DEBUG:
            return False
        if record.args:
            text = re.sub(r"%[-#0 +]*\d*(?:\.\d+)?[sdrifx]", "…", str(record.msg))
        else:
            text = str(record.msg).split(":", 1)[0]
        if record.exc_info and record.exc_info[1] is not None:
            text += f" ({type(record.exc_info[1]).__name__})"
        record.msg, record.args = text, None
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def _quiet_sdk_logs() -> None:
    for name in _SDK_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _QuietSdk) for f in logger.filters):
            logger.addFilter(_QuietSdk())


@dataclass(frozen=True, slots=True)
class McpTool:
    """A tool the server lists: its own name, description and input JSON Schema."""

    name: str
    description: str
    input_schema: dict[str, Any]


def call_result_text(result: Any) -> str:
    """A ``tools/call`` result as the text a model reads: the text blocks joined, else the
    structured content as JSON; other blocks (images, audio, resources) are named, not
    inlined."""
    texts: list[str] = []
    for block in getattr(result, "content", None) or ():
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(str(getattr(block, "text", "")))
        else:
            mime = getattr(block, "mime_type", None) or getattr(block, "uri", None) or ""
            texts.append(f"[{kind}{': ' + str(mime) if mime else ''}]")
    if texts:
        return "\n".join(texts)
    structured = getattr(result, "structured_content", None)
    return "" if structured is None else json.dumps(structured, ensure_ascii=False)


class McpConnection:
    """A session with one registered server (see the module docstring)."""

    def __init__(
        self, server: McpServer, secret: str | None = None, *, egress: EgressPolicy | None = None
    ) -> None:
        self.server = server
        self._secret = secret
        #: the policy this connection's HTTP requests go through (``None``: none)
        self.egress = egress
        self._client: Any = None
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._tools: list[McpTool] | None = None

    @property
    def name(self) -> str:
        return self.server.name

    async def start(self) -> None:
        """Open the session; a ``ToolSourceError`` when it cannot be opened in time."""
        _quiet_sdk_logs()
        self._task = asyncio.create_task(self._run(), name=f"mcp:{self.name}")
        ready = asyncio.ensure_future(self._ready.wait())
        try:
            done, _ = await asyncio.wait(
                {self._task, ready},
                timeout=self.server.timeout,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            ready.cancel()
        if self._ready.is_set():
            return
        if self._task in done:
            raise self._failure(self._task)
        await self.close()
        raise ToolSourceUnavailable(
            f"did not answer within {self.server.timeout:g} s", source=self.name
        )

    async def close(self) -> None:
        self._closing.set()
        task, self._task = self._task, None
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(task, timeout=self.server.timeout)
            except (TimeoutError, Exception):
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done() and self._ready.is_set()

    async def tools(self) -> list[McpTool]:
        """The server's tools (listed once per connection; a server that changes its list is
        re-read when its registration changes or it is reconnected)."""
        if self._tools is None:
            listed: list[McpTool] = []
            cursor: str | None = None
            while True:
                page = await self._request(self._session().list_tools(cursor=cursor))
                for tool in page.tools:
                    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
                    listed.append(McpTool(tool.name, tool.description or "", dict(schema)))
                cursor = getattr(page, "next_cursor", None)
                if not cursor:
                    break
            self._tools = listed
        return self._tools

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> str:
        """Call ``tool``; its text. A result the server marks as an error raises
        ``ToolSourceError`` with the server's message (the model reads it and may retry)."""
        result = await self._request(
            self._session().call_tool(
                tool, dict(arguments), read_timeout_seconds=self.server.timeout
            )
        )
        text = call_result_text(result)
        if getattr(result, "is_error", False):
            raise ToolSourceUnavailable(
                f"tool {tool!r} failed: {text or 'no message'}", source=self.name
            )
        return text

    # -- internals ------------------------------------------------------------------------

    def _session(self) -> Any:
        if not self.alive:
            raise ToolSourceUnavailable("the connection is closed", source=self.name)
        return self._client

    async def _request(self, pending: Any) -> Any:
        try:
            return await asyncio.wait_for(pending, timeout=self.server.timeout)
        except ToolSourceError:
            raise
        except TimeoutError:
            raise ToolSourceUnavailable(
                f"no answer within {self.server.timeout:g} s", source=self.name
            ) from None
        except Exception as exc:
            refused = _refusal(exc)
            if refused is not None:
                raise refused from None
            raise ToolSourceUnavailable(_describe(exc), source=self.name) from None

    def _failure(self, task: asyncio.Task[None]) -> ToolSourceError | EgressRefused:
        exc = task.exception() if not task.cancelled() else None
        refused = _refusal(exc) if exc is not None else None
        if refused is not None:
            return refused
        reason = _describe(exc) if exc is not None else "closed while starting"
        return ToolSourceUnavailable(f"could not connect: {reason}", source=self.name)

    async def _run(self) -> None:
        from mcp import Client  # optional (the 'mcp' extra): needed once a server is used

        async with contextlib.AsyncExitStack() as stack:
            target = await self._transport(stack)
            client = Client(target, read_timeout_seconds=self.server.timeout)
            self._client = await stack.enter_async_context(client)
            self._ready.set()
            await self._closing.wait()

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        # optional (the 'mcp' extra): needed once a server is used
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client

        server = self.server
        if server.transport == "stdio":
            assert server.command is not None  # the model's validator
            env = dict(server.env)
            if self._secret is not None and server.credential_env:
                env[server.credential_env] = self._secret
            params = StdioServerParameters(
                command=server.command, args=list(server.args), env=env, cwd=server.cwd
            )
            # the server's stderr is its own log: kept off ours (it may echo its environment)
            errlog = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115
            return stdio_client(params, errlog=errlog)
        headers = {"Authorization": f"Bearer {self._secret}"} if self._secret else {}
        http = await stack.enter_async_context(
            egress_client(self.egress, headers=headers, timeout=server.timeout)
        )
        assert server.url is not None  # the model's validator
        return streamable_http_client(server.url, http_client=http)


def _innermost(exc: BaseException) -> BaseException:
    # anyio task groups wrap the real failure in an ExceptionGroup
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _refusal(exc: BaseException) -> EgressRefused | None:
    """The egress policy's refusal ``exc`` is or wraps (raised as it is: a 403, not a 502)."""
    seen: set[int] = set()
    current: BaseException | None = _innermost(exc)
    while current is not None and id(current) not in seen:
        if isinstance(current, EgressRefused):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _describe(exc: BaseException) -> str:
    """A failure as its class and code: the HTTP status of an error answer, the JSON-RPC code
    of an error the server sent; never its text (which can quote what the server sent)."""
    inner = _innermost(exc)
    name = type(inner).__name__
    response = getattr(inner, "response", None)
    status = getattr(response, "status_code", None) if response is not None else None
    if isinstance(inner, httpx2.HTTPStatusError) and isinstance(status, int):
        return f"{name} (HTTP {status})"
    code = getattr(getattr(inner, "error", None), "code", None)
    if isinstance(code, int):
        return f"{name} (code {code})"
    return name
