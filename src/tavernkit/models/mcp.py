"""``McpServer``: one owner's registration of a Model Context Protocol server (record kind
``mcp_server``).

A registration says how to reach the server — ``stdio`` (a command tavernkit starts and talks
to over its stdin/stdout) or ``http`` (a streamable HTTP endpoint) — and which of its tools the
owner's chats may use. Its secret is never in the record: ``credential`` points at a stored API
key of the same owner (or an environment variable) and is read only after the registration
itself was loaded for that owner; tavernkit sends it as ``Authorization: Bearer`` (HTTP) or in
the environment variable ``credential_env`` (stdio).

``purpose`` is ``tools`` (its tools are offered to chat turns and ``generate_task``) or
``prose_linter`` (one of its tools is the response review's rule checker, never offered to
the author; see :mod:`tavernkit.generation.rule_checker`).
"""

from __future__ import annotations

import re
from typing import Literal, Self

from pydantic import Field, model_validator

from tavernkit.models.base import ValueModel
from tavernkit.models.profile import CredentialRef

__all__ = ["MCP_SERVER_KIND", "McpServer"]

MCP_SERVER_KIND = "mcp_server"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


class McpServer(ValueModel):
    """One MCP server registration (see the module docstring)."""

    name: str
    transport: Literal["stdio", "http"]
    #: stdio: the program and its arguments; ``env`` is added to a minimal environment
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    #: http: the streamable HTTP endpoint (``http://`` or ``https://``)
    url: str | None = None
    credential: CredentialRef | None = None
    #: stdio: the environment variable the credential is passed in
    credential_env: str | None = None
    enabled: bool = True
    #: tools of this server the owner's chats must not see (by the server's tool name)
    disabled_tools: list[str] = Field(default_factory=list)
    purpose: Literal["tools", "prose_linter"] = "tools"
    #: prose_linter: the tool that checks a text (default: the server's only tool)
    linter_tool: str | None = None
    #: seconds for connecting and for each call
    timeout: float = Field(default=30.0, gt=0, le=600)

    @model_validator(mode="after")
    def _check(self) -> Self:
        if not self.name.strip() or len(self.name) > 64:
            raise ValueError(f"MCP server name {self.name!r}: 1-64 characters")
        if self.transport == "stdio":
            if not self.command:
                raise ValueError("a stdio MCP server needs a command")
            if self.url:
                raise ValueError("a stdio MCP server has no url")
        else:
            if not self.url or not self.url.startswith(("http://", "https://")):
                raise ValueError("an http MCP server needs an http:// or https:// url")
            if self.command or self.args:
                raise ValueError("an http MCP server has no command or args")
        if self.credential_env is not None and self.transport != "stdio":
            raise ValueError("credential_env is for stdio servers (http sends a bearer token)")
        return self

    def tool_name(self, tool: str) -> str:
        """The name the model sees for the server's ``tool``: ``<server>__<tool>`` (the
        server's name with characters tool names cannot hold as ``_``, at most 24 of them),
        so two servers, or a server and a plugin, do not offer one name twice."""
        return f"{_UNSAFE.sub('_', self.name.strip())[:24]}__{tool}"
