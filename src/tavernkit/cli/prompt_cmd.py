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

from tavernkit.chat.inspect import inspection
from tavernkit.cli.chat import ensure_character, open_chat
from tavernkit.cli.chat_display import print_inspection
from tavernkit.cli.error_text import error_text
from tavernkit.cli.language import say
from tavernkit.errors import TavernKitError
from tavernkit.facade import Tavern

__all__ = ["print_inspection", "prompt_command"]

out = Console(highlight=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)

_KINDS = ("normal", "swipe", "regenerate", "continue", "impersonate")


def prompt_command(
    chat: Annotated[
        str | None, typer.Argument(help="Chat id or name (default: the latest chat).")
    ] = None,
    kind: Annotated[str, typer.Option("--kind", help=f"One of {', '.join(_KINDS)}.")] = "normal",
    fmt: Annotated[str, typer.Option("--format", "-f", help="text or json.")] = "text",
    profile: Annotated[str | None, typer.Option("--profile", "-p")] = None,
    member: Annotated[
        str | None,
        typer.Option("--member", help="Group chats: whose turn (default: the first unmuted)."),
    ] = None,
    home: Annotated[
        Path | None,
        typer.Option("--home", help="Data folder (default: $TAVERNKIT_HOME or the user data dir)."),
    ] = None,
) -> None:
    """Show the exact request the next turn would send, block by block."""
    if kind not in _KINDS or fmt not in ("text", "json"):
        err.print(f"[bold red]{say('error:')}[/] {say('bad --kind or --format')}")
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
            prepared = await tk.chats.preview(
                chat_id, kind=kind, overrides=overrides, member=member
            )
            return inspection(prepared)

    try:
        data = asyncio.run(main())
    except TavernKitError as exc:
        err.print(f"[bold red]{say('error:')}[/] {escape(error_text(exc))}")
        raise typer.Exit(1) from None
    if fmt == "json":
        out.print(
            json.dumps(data, ensure_ascii=False, indent=2, default=str),
            markup=False,
            soft_wrap=True,
        )
    else:
        print_inspection(out, data)
