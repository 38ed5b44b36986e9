"""``tavernkit lore test BOOK (--chat CHAT | --text TEXT)``: every entry of a lorebook, whether
it fires for the next turn, and why (the scan's own record, ``scan(explain=True)``). A dry run:
no timed effect advances and nothing is stored."""

from __future__ import annotations

import json
import random
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tavernkit.chat.lore_test import (
    lore_book,
    lore_rows,
    position_label,
    scan_lore_chat,
    scan_lore_text,
)
from tavernkit.cli._common import HomeOption, fail, run_in_tavern
from tavernkit.facade import Tavern
from tavernkit.text.tokens import ByteEstimateTokenizer

__all__ = ["lore_app", "lore_rows", "position_label", "print_rows"]

lore_app = typer.Typer(help="Lorebook tools.", no_args_is_help=True)
out = Console(highlight=False)


@lore_app.command("test")
def test(
    book: Annotated[str, typer.Argument(help="Lorebook name or id.")],
    chat: Annotated[str | None, typer.Option("--chat", help="Chat id or name to scan.")] = None,
    text: Annotated[
        str | None, typer.Option("--text", help="Scan this message instead of a chat.")
    ] = None,
    kind: Annotated[str, typer.Option("--kind", help="Generation type.")] = "normal",
    seed: Annotated[
        int | None, typer.Option("--seed", help="Seed the probability and group rolls.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
    home: HomeOption = None,
) -> None:
    """Scan a chat (or a message) with one lorebook: each entry, fired or not, and why."""
    if (chat is None) == (text is None):
        raise fail("give exactly one of --chat CHAT or --text TEXT")
    rng = random.Random(seed).random

    async def main(tk: Tavern) -> list[dict[str, Any]]:
        name, lorebook = await lore_book(tk.store, tk.owner, book)
        if chat is not None:
            result = await scan_lore_chat(tk.store, tk.owner, name, lorebook, chat, kind, rng)
        else:
            result = scan_lore_text(await tk.settings(), name, lorebook, text or "", kind, rng)
        return lore_rows(result, ByteEstimateTokenizer().count)

    rows = run_in_tavern(home, main)
    if as_json:
        for row in rows:
            out.print(
                json.dumps(row, ensure_ascii=False, default=str), markup=False, soft_wrap=True
            )
        return
    print_rows(out, rows)


def print_rows(console: Console, rows: list[dict[str, Any]]) -> None:
    fired = sum(1 for r in rows if r["fired"])
    table = Table(title=f"{fired} of {len(rows)} entries fire", title_justify="left")
    table.add_column("uid", justify="right", style="dim")
    table.add_column("entry", overflow="fold")
    table.add_column("fires", no_wrap=True)
    table.add_column("why", overflow="fold")
    table.add_column("position", no_wrap=True)
    table.add_column("order", justify="right")
    table.add_column("tokens", justify="right")
    for row in rows:
        why = row["why"]
        if row["loop"]:
            why += f" [recursion level {row['loop']}]"
        if row["min_activations"]:
            why += " [min activations widened the scan]"
        table.add_row(
            escape(str(row["uid"])),
            escape(row["comment"] or row["key"]),
            "[green]yes[/]" if row["fired"] else "[dim]no[/]",
            escape(why),
            escape(row["position_label"]),
            f"{row['order']:g}" if isinstance(row["order"], int | float) else str(row["order"]),
            str(row["tokens"]),
        )
    console.print(table)
