"""MCP server registrations over HTTP: each user's own (``tk.mcp``), listed, read, made,
switched on and off (whole, or one tool), and asked for their tools.

The credential is write-only: ``token`` is stored as one of the caller's API keys (labelled
``mcp:<name>``) and every answer shows only its label and fingerprint; the key goes with the
registration when it is replaced or deleted. With accounts on, only an admin may register a
``stdio`` server (it runs a command on the server's machine) or point a credential at the
server's environment (``key_env``): a user brings an HTTP endpoint and their own token, at a
URL the egress policy allows (:mod:`tavernkit.egress`; 403 ``EgressRefused``, also when the
tools are listed). A failing server is a 502 naming its class and code, never its text.
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tavernkit.errors import Conflict, FormatError, NotFound, PermissionDenied
from tavernkit.facade import Tavern
from tavernkit.models.mcp import McpServer
from tavernkit.models.profile import CredentialRef
from tavernkit.server.auth import CurrentPrincipal, UserTavern
from tavernkit.server.routes._common import ModelCall, State, check_egress

__all__ = ["router"]

router = APIRouter(prefix="/mcp/servers", tags=["mcp"])

_Short = Field(default=None, min_length=1, max_length=200)


class NewMcpServer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64)
    transport: Literal["stdio", "http"] = "http"
    url: str | None = Field(default=None, max_length=2000)
    command: str | None = Field(default=None, max_length=2000)
    args: Annotated[list[str], Field(max_length=100)] = []
    env: Annotated[dict[str, str], Field(max_length=100)] = {}
    cwd: str | None = Field(default=None, max_length=2000)
    #: the bearer token (HTTP) or credential (stdio): write-only
    token: str | None = Field(default=None, min_length=1, max_length=10_000)
    #: the server's environment variable holding the token (admins only, accounts on)
    key_env: str | None = _Short
    credential_env: str | None = _Short
    purpose: Literal["tools", "prose_linter"] = "tools"
    linter_tool: str | None = _Short
    timeout: float = Field(default=30.0, gt=0, le=600)
    replace: bool = False


class McpServerBody(BaseModel):
    name: str
    transport: str
    url: str | None
    command: str | None
    args: list[str]
    #: the names of the variables a stdio server is given (their values are not shown)
    env: list[str]
    #: the credential's label (``mcp:<name> (fingerprint)`` or ``$NAME``), never the secret
    credential: str | None
    enabled: bool
    disabled_tools: list[str]
    purpose: str
    linter_tool: str | None
    timeout: float


class Switch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool


class McpToolBody(BaseModel):
    #: the name the model sees (``<server>__<tool>``)
    name: str
    description: str


def _label(server_name: str) -> str:
    return f"mcp:{server_name}"


async def _body(tk: Tavern, server: McpServer) -> McpServerBody:
    credential = None
    ref = server.credential
    if ref is not None and ref.key_id:
        prints = {k.id: k.fingerprint for k in await tk.store.list_api_keys(owner=tk.owner)}
        credential = f"{ref.label or 'key'} ({prints.get(ref.key_id, 'missing')})"
    elif ref is not None and ref.env:
        credential = f"${ref.env}"
    return McpServerBody(
        name=server.name,
        transport=server.transport,
        url=server.url,
        command=server.command,
        args=server.args,
        env=sorted(server.env),
        credential=credential,
        enabled=server.enabled,
        disabled_tools=server.disabled_tools,
        purpose=server.purpose,
        linter_tool=server.linter_tool,
        timeout=server.timeout,
    )


async def _find(tk: Tavern, name: str) -> McpServer | None:
    return next((s for s in await tk.mcp.registrations() if s.name == name), None)


async def _owned(tk: Tavern, name: str) -> McpServer:
    """The caller's registration ``name``; :class:`NotFound` otherwise (another user's
    answers the same as none)."""
    found = await _find(tk, name)
    if found is None:
        raise NotFound(f"no MCP server {name!r}")
    return found


async def _drop_key(tk: Tavern, server: McpServer) -> None:
    """Delete the key this API stored for ``server`` (a key it did not make stays)."""
    ref = server.credential
    if ref is not None and ref.key_id and ref.label == _label(server.name):
        with contextlib.suppress(NotFound):
            await tk.store.delete_api_key(ref.key_id, owner=tk.owner)


@router.get("")
async def list_mcp_servers(tk: UserTavern) -> list[McpServerBody]:
    return [await _body(tk, s) for s in await tk.mcp.registrations()]


@router.post("", status_code=201)
async def register_mcp_server(
    body: NewMcpServer, tk: UserTavern, who: CurrentPrincipal, state: State
) -> McpServerBody:
    """Register a server (``replace``: overwrite one of this name; 409 otherwise). Nothing is
    stored when any part is refused."""
    restricted = state.settings.accounts and not who.is_admin
    if restricted and body.transport == "stdio":
        raise PermissionDenied("only an admin may register a stdio MCP server")
    if restricted and body.key_env is not None:
        raise PermissionDenied("only an admin may use the server's environment for a credential")
    if body.token is not None and body.key_env is not None:
        raise FormatError("give token or key_env, not both", field="token")
    existing = await _find(tk, body.name)
    if existing is not None and not body.replace:
        raise Conflict(f"an MCP server named {body.name!r} is registered (replace to overwrite)")
    fields = body.model_dump(exclude={"token", "key_env", "replace"})
    try:
        McpServer.model_validate(fields)  # checked before the key is stored
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise FormatError(str(first["msg"]), field=where) from None
    if body.transport == "http":
        await check_egress(tk, body.url, field="url")
    credential = None
    if body.key_env is not None:
        credential = CredentialRef(env=body.key_env, label=body.key_env)
    elif body.token is not None:
        label = _label(body.name)
        key_id = await tk.store.add_api_key("mcp", body.token, owner=tk.owner, label=label)
        credential = CredentialRef(key_id=key_id, label=label)
    server = McpServer.model_validate({**fields, "credential": credential})
    await tk.mcp.add(server, replace=existing is not None)
    if existing is not None and existing.credential != credential:
        await _drop_key(tk, existing)
    return await _body(tk, server)


@router.get("/{name}")
async def get_mcp_server(name: str, tk: UserTavern) -> McpServerBody:
    return await _body(tk, await _owned(tk, name))


@router.delete("/{name}", status_code=204)
async def delete_mcp_server(name: str, tk: UserTavern) -> None:
    """Delete the registration and the key stored for it."""
    server = await _owned(tk, name)
    await tk.mcp.remove(name)
    await _drop_key(tk, server)


@router.put("/{name}/enabled")
async def switch_mcp_server(name: str, body: Switch, tk: UserTavern) -> McpServerBody:
    """Offer the server's tools to chats, or stop offering them."""
    await _owned(tk, name)
    await tk.mcp.set_enabled(name, body.enabled)
    return await _body(tk, await _owned(tk, name))


@router.put("/{name}/tools/{tool}/enabled")
async def switch_mcp_tool(name: str, tool: str, body: Switch, tk: UserTavern) -> McpServerBody:
    """Offer one tool of the server (by its own name), or stop offering it."""
    await _owned(tk, name)
    await tk.mcp.set_tool_enabled(name, tool, body.enabled)
    return await _body(tk, await _owned(tk, name))


@router.get("/{name}/tools")
async def list_mcp_tools(name: str, tk: UserTavern, caller: ModelCall) -> list[McpToolBody]:
    """Connect and list the tools chats are offered (disabled ones left out; none when the
    server is off). A call out on the caller's behalf: counted against their ``turn_rate``."""
    await _owned(tk, name)
    tools = await tk.mcp.function_tools(name)
    return [McpToolBody(name=t.name, description=t.description) for t in tools]
