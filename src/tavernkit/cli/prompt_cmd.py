"""``tavernkit prompt [CHAT]``: the prompt inspector.

It prints the exact request the next turn would send (built by the same code as the turn, as
a dry run), each block labelled with its source and token count, the budget, the lorebook
entries that fire and why; ``--format json`` prints all of it, wire body included.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tavernkit.chat.inspect import inspection
from tavernkit.cli.chat import ensure_character, open_chat
from tavernkit.errors import TavernKitError
from tavernkit.facade import Tavern

__all__ = ["print_inspection", "prompt_command"]

out = Console(highlight=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)

_KINDS = ("normal", "swipe", "regenerate", "continue", "impersonate")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "[image]")) for p in content if isinstance(p, dict))
    return ""


def print_inspection(console: Console, data: dict[str, Any]) -> None:
    """The inspector as a table: one row per block, then the lorebook entries."""
    title = (
        f"{data['kind']} turn -> {data['profile']} ({data['source']}, {data['model'] or '-'}): "
        f"{data['total_tokens']} tokens of {data['budget'] or '?'} budget"
    )
    table = Table(title=title, title_justify="left")
    table.add_column("#", justify="right", style="dim")
    table.add_column("source", style="cyan", no_wrap=True)
    table.add_column("role", no_wrap=True)
    table.add_column("tokens", justify="right")
    table.add_column("content", overflow="fold")
    for i, block in enumerate(data["blocks"]):
        source = block.get("source", "")
        label = f"{source}: {block.get('identifier', '')}"
        if block.get("entries"):
            label += " [" + ", ".join(block["entries"]) + "]"
        if block.get("message_index") is not None:
            label += f" (message #{block['message_index']})"
        table.add_row(
            str(i),
            escape(label),
            escape(str(block.get("role", ""))),
            str(block.get("tokens", "")),
            escape(_text(block.get("content"))),
        )
    console.print(table)
    if "request_as_built" in data:
        console.print(
            "[yellow]plugin hooks changed the request:[/] the blocks are the prompt as built; "
            "what is sent is the hooks' version (--format json shows both: request, "
            "request_as_built)"
        )
    for key, entry in data["lorebook"].items():
        console.print(
            f"[bold]lorebook[/] {escape(entry['comment'] or key)} [dim]{escape(key)}: "
            f"{escape(entry['why'])}[/]"
        )


def prompt_command(
    chat: Annotated[
        str | None, typer.Argument(help="Chat id or name (default: the latest chat).")
    ] = None,
    kind: Annotated[str, typer.Option("--kind", help=f"One of {', '.join(_KINDS)}.")] = "normal",
    fmt: Annotated[str, typer.Option("--format", "-f", help="text or json.")] = "text",
    profile: Annotated[str | None, typer.Option("--profile", "-p")] = None,
    home: Annotated[
        Path | None,
        typer.Option("--home", help="Data folder (default: $TAVERNKIT_HOME or the user data dir)."),
    ] = None,
) -> None:
    """Show the exact request the next turn would send, block by block."""
    if kind not in _KINDS or fmt not in ("text", "json"):
        err.print("[bold red]error:[/] bad --kind or --format")
        raise typer.Exit(2)

    async def main() -> dict[str, Any]:
        async with Tavern(home) as tk:
            chat_id = chat
            if chat_id is None:
                chats = await tk.store.list_chats(owner=tk.owner)
                if chats:
                    chat_id = chats[0].id
                else:
                    character = await ensure_character(tk, None)
                    chat_id, _ = await open_chat(
                        tk.chats, character, chat=None, new=True, persona=None
                    )
            overrides = {"profile": profile} if profile else None
            return inspection(await tk.chats.preview(chat_id, kind=kind, overrides=overrides))

    try:
        data = asyncio.run(main())
    except TavernKitError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from None
    if fmt == "json":
        out.print(
            json.dumps(data, ensure_ascii=False, indent=2, default=str),
            markup=False,
            soft_wrap=True,
        )
    else:
        print_inspection(out, data)
