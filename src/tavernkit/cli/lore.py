"""``tavernkit lore test BOOK (--chat CHAT | --text TEXT)``: every entry of a lorebook, whether
it fires for the next turn, and why (the scan's own record, ``scan(explain=True)``). A dry run:
no timed effect advances and nothing is stored."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tavernkit.cli._common import HomeOption, fail, run_in_tavern
from tavernkit.errors import TavernKitError
from tavernkit.facade import Tavern
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.state import ScopedBook
from tavernkit.prompt.pipeline import PromptTarget, begin
from tavernkit.store.chat_state import load_chat_state
from tavernkit.text.tokens import ByteEstimateTokenizer
from tavernkit.worldinfo import Book, WorldInfoResult, scan
from tavernkit.worldinfo.replay import name_substitute

__all__ = ["lore_app", "lore_rows", "position_label", "print_rows"]

lore_app = typer.Typer(help="Lorebook tools.", no_args_is_help=True)
out = Console(highlight=False)

_POSITIONS = {
    0: "before char",
    1: "after char",
    2: "AN top",
    3: "AN bottom",
    5: "before examples",
    6: "after examples",
}
_ROLES = {0: "system", 1: "user", 2: "assistant"}


def position_label(position: Any, depth: Any, role: Any, outlet: Any = None) -> str:
    """SillyTavern's position names (``@D4 system`` for an in-chat depth entry)."""
    if position == 4 and not isinstance(position, bool):
        d = 4 if depth is None else depth
        return f"@D{d} {_ROLES.get(0 if role is None else role, str(role))}"
    if position == 7 and not isinstance(position, bool):
        return f"outlet {outlet}" if outlet else "outlet"
    if isinstance(position, int) and not isinstance(position, bool) and position in _POSITIONS:
        return _POSITIONS[position]
    return str(position)


def lore_rows(result: WorldInfoResult, count: Callable[[str], int]) -> list[dict[str, Any]]:
    """One row per scanned entry (the scan's order): the explanation plus the position label
    and the tokens of the content it emits (fired) or would emit (before macros)."""
    if result.explain is None:
        raise TavernKitError("the scan was run without explain=True")
    emitted = {a.key: a for a in result.activated}
    rows: list[dict[str, Any]] = []
    for reason in result.explain:
        row = reason.to_json()
        fired = emitted.get(reason.key)
        content = fired.content if fired is not None else reason.content
        outlet = fired.outlet_name if fired is not None else None
        row["why"] = reason.detail
        row["position_label"] = position_label(reason.position, reason.depth, reason.role, outlet)
        row["tokens"] = count(content) if content else 0
        row["content"] = content
        rows.append(row)
    return rows


async def _book(tk: Tavern, book: str) -> tuple[str, Lorebook]:
    lorebook = await tk.store.get("lorebook", book, owner=tk.owner)
    if not isinstance(lorebook, Lorebook):
        raise TavernKitError(f"{book!r} is not a lorebook")
    record = await tk.store.get_record("lorebook", book, owner=tk.owner)
    return record.info.name, lorebook


async def _scan_chat(
    tk: Tavern, name: str, lorebook: Lorebook, chat: str, kind: str, rng: Callable[[], float]
) -> WorldInfoResult:
    state = await load_chat_state(tk.store, owner=tk.owner, chat_id=chat)
    state = state.model_copy(
        update={"books": [ScopedBook(name=name, scope="global", book=lorebook)]}
    )
    # The turn's own scan (the prompt pipeline's), asked to explain itself.
    session = begin(state, PromptTarget(tokenizer=ByteEstimateTokenizer()))
    result = session.scan(kind, rng=rng, dry_run=True, explain=True)
    return result if result is not None else WorldInfoResult()


async def _scan_text(
    tk: Tavern, name: str, lorebook: Lorebook, text: str, kind: str, rng: Callable[[], float]
) -> WorldInfoResult:
    settings = await tk.settings()
    prompt = settings.prompt
    return scan(
        [Book(name, lorebook)],
        [text],
        max_context=prompt.max_context - prompt.amount_gen,
        settings=settings.world_info,
        trigger=kind,
        substitute=name_substitute("", settings.selections.user_name),
        count_tokens=ByteEstimateTokenizer().count,
        rng=rng,
        dry_run=True,
        compat=settings.compat,
        explain=True,
    )


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
        name, lorebook = await _book(tk, book)
        if chat is not None:
            result = await _scan_chat(tk, name, lorebook, chat, kind, rng)
        else:
            result = await _scan_text(tk, name, lorebook, text or "", kind, rng)
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
