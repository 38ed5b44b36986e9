"""``tavernkit lore test BOOK --chat CHAT``: which entries of a lorebook fire for a chat's next
turn, and why. A dry run: no timed effect advances and nothing is stored."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from tavernkit.errors import TavernKitError
from tavernkit.facade import Tavern
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.state import ScopedBook
from tavernkit.prompt.from_chat_state import (
    prompt_state_from_chat_state,
    scan_for_state,
    state_substitute,
)
from tavernkit.store.chat_state import load_chat_state
from tavernkit.text.tokens import ByteEstimateTokenizer

__all__ = ["lore_app"]

lore_app = typer.Typer(help="Lorebook tools.", no_args_is_help=True)
out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


@lore_app.command("test")
def test(
    book: Annotated[str, typer.Argument(help="Lorebook name or id.")],
    chat: Annotated[str, typer.Option("--chat", help="Chat id or name to scan.")],
    kind: Annotated[str, typer.Option("--kind", help="Generation type.")] = "normal",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
    home: Annotated[
        Path | None,
        typer.Option("--home", help="Data folder (default: $TAVERNKIT_HOME or the user data dir)."),
    ] = None,
) -> None:
    """Scan a chat with one lorebook and list the entries that fire."""

    async def main() -> list[dict[str, Any]]:
        async with Tavern(home) as tk:
            lorebook = await tk.store.get("lorebook", book, owner=tk.owner)
            if not isinstance(lorebook, Lorebook):
                raise TavernKitError(f"{book!r} is not a lorebook")
            record = await tk.store.get_record("lorebook", book, owner=tk.owner)
            state = await load_chat_state(tk.store, owner=tk.owner, chat_id=chat)
            state = state.model_copy(
                update={"books": [ScopedBook(name=record.info.name, scope="global", book=lorebook)]}
            )
            pstate = prompt_state_from_chat_state(state)
            sub = state_substitute(state, pstate, compat=state.compat)
            wi = scan_for_state(
                state,
                pstate,
                sub,
                kind=kind,
                tokenizer=ByteEstimateTokenizer(),
                compat=state.compat,
                dry_run=True,
            )
            rows: list[dict[str, Any]] = []
            for entry in wi.activated if wi is not None else ():
                wire = entry.wire
                keys = [k for k in wire.get("key") or [] if isinstance(k, str)]
                why = "constant" if wire.get("constant") else "keys: " + ", ".join(keys)
                rows.append(
                    {
                        "uid": entry.uid,
                        "comment": wire.get("comment") or "",
                        "why": why,
                        "position": entry.position,
                        "content": entry.content,
                    }
                )
            return rows

    try:
        rows = asyncio.run(main())
    except TavernKitError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from None
    if as_json:
        for row in rows:
            out.print(
                json.dumps(row, ensure_ascii=False, default=str), markup=False, soft_wrap=True
            )
        return
    if not rows:
        out.print("[dim]no entry fires[/]")
    for row in rows:
        label = row["comment"] or f"entry {row['uid']}"
        out.print(f"[bold]{escape(str(label))}[/] [dim](uid {row['uid']}) {escape(row['why'])}[/]")
