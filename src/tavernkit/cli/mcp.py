"""``tavernkit mcp``: the owner's MCP servers (tool sources and the review's prose linter).

``add NAME --stdio COMMAND [ARG...]`` or ``add NAME --url URL`` registers one (``--key-env`` /
``--key-id`` name its credential, never the secret itself); ``list``; ``tools NAME`` connects
and lists what the model would be offered; ``enable`` / ``disable NAME [TOOL]`` switch a server
or one of its tools; ``remove NAME``.
"""

from __future__ import annotations

from typing import Annotated, Literal

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tavernkit.cli._common import HomeOption, fail, run_in_tavern
from tavernkit.facade import Tavern
from tavernkit.models.mcp import McpServer
from tavernkit.models.profile import CredentialRef

__all__ = ["mcp_app"]

mcp_app = typer.Typer(help="MCP servers: tools for chats, or the review's prose linter.")
out = Console(highlight=False)


@mcp_app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="Its name (prefixes the tool names).")],
    command: Annotated[
        list[str] | None,
        typer.Argument(help="stdio: the command and its arguments (after --).", show_default=False),
    ] = None,
    url: Annotated[str | None, typer.Option("--url", help="A streamable HTTP endpoint.")] = None,
    key_env: Annotated[
        str | None, typer.Option("--key-env", help="Environment variable holding its token.")
    ] = None,
    key_id: Annotated[
        str | None, typer.Option("--key-id", help="A stored API key (its id) as its token.")
    ] = None,
    credential_env: Annotated[
        str | None,
        typer.Option("--credential-env", help="stdio: the variable the token is passed in."),
    ] = None,
    linter: Annotated[
        str | None,
        typer.Option("--prose-linter", help="Make it the review's rule checker, with this tool."),
    ] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Overwrite one of this name.")] = False,
    home: HomeOption = None,
) -> None:
    """Register an MCP server: ``add NAME -- COMMAND ARGS`` (stdio) or ``add NAME --url URL``."""
    credential = CredentialRef(env=key_env, key_id=key_id) if key_env or key_id else None
    transport: Literal["stdio", "http"] = "http" if url else "stdio"
    purpose: Literal["tools", "prose_linter"] = "prose_linter" if linter else "tools"
    try:
        server = McpServer(
            name=name,
            transport=transport,
            command=command[0] if command else None,
            args=list(command[1:]) if command else [],
            url=url,
            credential=credential,
            credential_env=credential_env,
            purpose=purpose,
            linter_tool=linter,
        )
    except ValidationError as exc:
        raise fail(f"MCP server {name!r}: {exc.errors()[0]['msg']}") from None

    async def main(tk: Tavern) -> None:
        await tk.mcp.add(server, replace=replace)

    run_in_tavern(home, main)
    out.print(f"registered MCP server [bold]{escape(name)}[/] ({transport})")


@mcp_app.command("list")
def list_(home: HomeOption = None) -> None:
    """The registered servers."""

    async def main(tk: Tavern) -> list[McpServer]:
        return await tk.mcp.registrations()

    servers = run_in_tavern(home, main)
    if not servers:
        out.print("[dim]no MCP servers[/]")
        return
    table = Table(title_justify="left")
    for column in ("name", "transport", "target", "purpose", "enabled", "disabled tools"):
        table.add_column(column)
    for server in servers:
        target = server.url or " ".join([server.command or "", *server.args])
        table.add_row(
            escape(server.name),
            server.transport,
            escape(target),
            server.purpose,
            "yes" if server.enabled else "no",
            escape(", ".join(server.disabled_tools)),
        )
    out.print(table)


@mcp_app.command("tools")
def tools(
    name: Annotated[str, typer.Argument(help="The server.")], home: HomeOption = None
) -> None:
    """Connect and list the tools the model is offered (disabled ones left out)."""

    async def main(tk: Tavern) -> list[tuple[str, str]]:
        return [(t.name, t.description) for t in await tk.context().mcp_tools(name)]

    for tool_name, description in run_in_tavern(home, main):
        out.print(f"[bold]{escape(tool_name)}[/]  {escape(description)}")


def _switch(name: str, tool: str | None, enabled: bool, home: HomeOption) -> None:
    async def main(tk: Tavern) -> None:
        if tool is None:
            await tk.mcp.set_enabled(name, enabled)
        else:
            await tk.mcp.set_tool_enabled(name, tool, enabled)

    run_in_tavern(home, main)
    what = f"tool {tool} of {name}" if tool else name
    out.print(f"{'enabled' if enabled else 'disabled'} {escape(what)}")


@mcp_app.command("enable")
def enable(
    name: Annotated[str, typer.Argument(help="The server.")],
    tool: Annotated[str | None, typer.Argument(help="One of its tools (its own name).")] = None,
    home: HomeOption = None,
) -> None:
    """Offer a server (or one of its tools) again."""
    _switch(name, tool, True, home)


@mcp_app.command("disable")
def disable(
    name: Annotated[str, typer.Argument(help="The server.")],
    tool: Annotated[str | None, typer.Argument(help="One of its tools (its own name).")] = None,
    home: HomeOption = None,
) -> None:
    """Stop offering a server (or one of its tools) to chats."""
    _switch(name, tool, False, home)


@mcp_app.command("remove")
def remove(
    name: Annotated[str, typer.Argument(help="The server.")], home: HomeOption = None
) -> None:
    """Delete a registration."""

    async def main(tk: Tavern) -> None:
        await tk.mcp.remove(name)

    run_in_tavern(home, main)
    out.print(f"removed MCP server {escape(name)}")
