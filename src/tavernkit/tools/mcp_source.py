"""An owner's MCP servers as function tools (``Runtime.mcp``).

Registrations are ``mcp_server`` records of the owner (:class:`~tavernkit.models.mcp.McpServer`),
so a user's servers are theirs alone: every read goes through the store with the runtime's
owner, and a registration's credential is loaded only after the registration itself was found
for that owner (a stored key of another owner is ``NotFound``, as for connection profiles).

:meth:`McpTools.tools` is a :class:`~tavernkit.tools.registry.ToolSource`: the Tavern's tool
registry asks it before every chat turn, so an enabled server's tools (minus the ones the owner
disabled) are offered like native tools, and the turn runner's tool loop, argument validation
and replay by identity apply to them unchanged. Each tool is a :class:`FunctionTool` named
``<server>__<tool>`` whose action calls the server. ``generate_task`` takes them as
``tools=await ctx.mcp_tools()``. A ``prose_linter`` registration is never offered: it is the
response review's rule checker (:meth:`McpTools.linter`).

Connections are opened on first use and kept (one per registration) until the registration
changes or the Tavern closes. A server that cannot be reached is left out of that turn and
logged by name and exception class; one broken server never breaks a chat.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from tavernkit.egress import EgressPolicy
from tavernkit.errors import EgressRefused, GenerateTaskError, NotFound, ToolSourceError
from tavernkit.models.mcp import MCP_SERVER_KIND, McpServer
from tavernkit.store.protocol import Store
from tavernkit.store.record_types import RecordInfo
from tavernkit.tools.mcp_connection import McpConnection, McpTool
from tavernkit.tools.registry import FunctionTool

__all__ = ["McpLinter", "McpTools", "StoreHolder"]

log = logging.getLogger(__name__)


class StoreHolder(Protocol):
    """What this needs of the runtime: its store, owner and egress policy."""

    @property
    def store(self) -> Store: ...

    @property
    def egress(self) -> EgressPolicy | None: ...

    owner: str


@dataclass(frozen=True, slots=True)
class McpLinter:
    """A ``prose_linter`` registration's checker tool, connected."""

    registration: str
    tool: McpTool
    text_argument: str
    connection: McpConnection

    async def check(self, text: str) -> str:
        return await self.connection.call(self.tool.name, {self.text_argument: text})


class McpTools:
    """The MCP servers of one runtime's owner (see the module docstring)."""

    def __init__(self, holder: StoreHolder, *, environ: Mapping[str, str] | None = None) -> None:
        self._holder = holder
        self._environ = environ
        #: registration id -> (its last update, the connection)
        self._connections: dict[str, tuple[str, McpConnection]] = {}

    # -- registrations --------------------------------------------------------------------

    async def add(self, server: McpServer, *, replace: bool = False) -> None:
        """Store a registration (``replace`` overwrites one of the same name)."""
        store, owner = self._holder.store, self._holder.owner
        existing = await self._find(server.name)
        if existing is not None and not replace:
            raise ToolSourceError("already registered (add with replace=True)", source=server.name)
        await store.put(
            MCP_SERVER_KIND,
            server,
            owner=owner,
            name=server.name,
            id=existing.id if existing is not None else None,
        )

    async def remove(self, name: str) -> None:
        info = await self._require(name)
        await self._holder.store.delete(MCP_SERVER_KIND, info.id, owner=self._holder.owner)
        await self._drop(info.id)

    async def get(self, name: str) -> McpServer:
        info = await self._require(name)
        return await self._load(info)

    async def registrations(self) -> list[McpServer]:
        store, owner = self._holder.store, self._holder.owner
        return [await self._load(info) for info in await store.list(MCP_SERVER_KIND, owner=owner)]

    async def set_enabled(self, name: str, enabled: bool) -> None:
        server = await self.get(name)
        await self.add(server.model_copy(update={"enabled": enabled}), replace=True)

    async def set_tool_enabled(self, name: str, tool: str, enabled: bool) -> None:
        """Offer (or stop offering) one tool of server ``name`` to this owner's chats."""
        server = await self.get(name)
        disabled = [t for t in server.disabled_tools if t != tool]
        if not enabled:
            disabled.append(tool)
        await self.add(server.model_copy(update={"disabled_tools": disabled}), replace=True)

    # -- tools ----------------------------------------------------------------------------

    async def tools(self, kind: str = "normal") -> list[FunctionTool]:
        """The function tools of every enabled ``tools`` registration (the registry's
        ``ToolSource``); a server that fails is left out and logged."""
        del kind
        out: list[FunctionTool] = []
        store, owner = self._holder.store, self._holder.owner
        for info in await store.list(MCP_SERVER_KIND, owner=owner):
            server = await self._load(info)
            if not server.enabled or server.purpose != "tools":
                continue
            try:
                out += await self._function_tools(info, server)
            except (ToolSourceError, EgressRefused) as exc:  # messages name no server text
                log.warning("MCP server %s left out of this turn: %s", server.name, exc)
        return out

    async def function_tools(self, name: str) -> list[FunctionTool]:
        """The tools of one registration (errors raise: the caller asked for this one)."""
        info = await self._require(name)
        server = await self._load(info)
        if server.purpose != "tools":
            raise ToolSourceError(
                "a prose_linter's tools are the response reviewer's, never the author's",
                source=server.name,
            )
        if not server.enabled:
            return []
        return await self._function_tools(info, server)

    async def linter(self) -> McpLinter | None:
        """The owner's enabled ``prose_linter`` checker, or ``None`` when there is none (a
        disabled or removed registration acts as none). A checker tool must take exactly one
        required argument, a string; a registration whose tool does not is an error."""
        store, owner = self._holder.store, self._holder.owner
        for info in await store.list(MCP_SERVER_KIND, owner=owner):
            server = await self._load(info)
            if not server.enabled or server.purpose != "prose_linter":
                continue
            connection = await self._connection(info, server)
            tools = await connection.tools()
            if server.linter_tool is not None:
                tool = next((t for t in tools if t.name == server.linter_tool), None)
            else:
                tool = tools[0] if len(tools) == 1 else None
            if tool is None:
                raise ToolSourceError(
                    "a prose_linter needs linter_tool naming one of its tools "
                    f"({', '.join(t.name for t in tools) or 'it lists none'})",
                    source=server.name,
                )
            return McpLinter(server.name, tool, _text_argument(server, tool), connection)
        return None

    async def close(self) -> None:
        connections = [c for _, c in self._connections.values()]
        self._connections.clear()
        for connection in connections:
            await connection.close()

    # -- internals ------------------------------------------------------------------------

    async def _function_tools(self, info: RecordInfo, server: McpServer) -> list[FunctionTool]:
        connection = await self._connection(info, server)
        disabled = set(server.disabled_tools)
        out: list[FunctionTool] = []
        for tool in await connection.tools():
            if tool.name in disabled:
                continue
            try:
                out.append(_function_tool(server, connection, tool))
            except GenerateTaskError:
                # a name (with the server's prefix) the model APIs refuse: 64 characters of
                # letters, digits, '_' and '-'
                log.warning(
                    "MCP server %s: tool %r has an unusable name; left out", server.name, tool.name
                )
        return out

    async def _connection(self, info: RecordInfo, server: McpServer) -> McpConnection:
        stamp = info.updated.isoformat() if info.updated is not None else ""
        egress = self._holder.egress
        held = self._connections.get(info.id)
        if held is not None and held[0] == stamp and held[1].alive and held[1].egress == egress:
            return held[1]
        await self._drop(info.id)
        # the registration was found for this owner above; only now is its secret read
        connection = McpConnection(server, await self._secret(server), egress=egress)
        await connection.start()
        self._connections[info.id] = (stamp, connection)
        return connection

    async def _drop(self, record_id: str) -> None:
        held = self._connections.pop(record_id, None)
        if held is not None:
            await held[1].close()

    async def _secret(self, server: McpServer) -> str | None:
        ref = server.credential
        if ref is None:
            return None
        if ref.key_id:
            try:
                return await self._holder.store.get_api_key_secret(
                    ref.key_id, owner=self._holder.owner
                )
            except NotFound:
                raise ToolSourceError(
                    f"its credential key {ref.key_id!r} is not one of this owner's keys",
                    source=server.name,
                ) from None
        environ = os.environ if self._environ is None else self._environ
        if ref.env and environ.get(ref.env):
            return environ[ref.env]
        raise ToolSourceError(
            f"its credential names the environment variable {ref.env!r}, which is not set",
            source=server.name,
        )

    async def _find(self, name: str) -> RecordInfo | None:
        store, owner = self._holder.store, self._holder.owner
        for info in await store.list(MCP_SERVER_KIND, owner=owner):
            if info.name == name:
                return info
        return None

    async def _require(self, name: str) -> RecordInfo:
        info = await self._find(name)
        if info is None:
            raise ToolSourceError("no such registration for this owner", source=name)
        return info

    async def _load(self, info: RecordInfo) -> McpServer:
        model = await self._holder.store.get(MCP_SERVER_KIND, info.id, owner=self._holder.owner)
        assert isinstance(model, McpServer)
        return model


def _function_tool(server: McpServer, connection: McpConnection, tool: McpTool) -> FunctionTool:
    async def action(args: dict[str, Any]) -> str:
        return await connection.call(tool.name, args)

    return FunctionTool(
        name=server.tool_name(tool.name),
        description=tool.description,
        parameters=tool.input_schema or {"type": "object", "properties": {}},
        action=action,
        display_name=f"{tool.name} ({server.name})",
    )


def _text_argument(server: McpServer, tool: McpTool) -> str:
    schema = tool.input_schema
    required = schema.get("required") or []
    properties = schema.get("properties") or {}
    if len(required) == 1:
        spec = properties.get(required[0]) or {}
        if isinstance(spec, Mapping) and spec.get("type") == "string":
            return str(required[0])
    raise ToolSourceError(
        f"prose_linter tool {tool.name!r} must take exactly one required string argument",
        source=server.name,
    )
