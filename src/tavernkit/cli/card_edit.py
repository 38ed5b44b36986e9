"""``tavernkit card edit NAME "INSTRUCTION"``: argument parsing and printing around the
character-editor assistant of :mod:`tavernkit.assist.card_edit`."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from tavernkit.assist.card_edit import (
    EDITABLE_FIELDS,
    FieldEdit,
    apply_edits,
    load_card,
    propose_edits,
)
from tavernkit.cli._common import HomeOption
from tavernkit.cli.error_text import error_text
from tavernkit.cli.language import say
from tavernkit.errors import GenerateTaskError, TavernKitError
from tavernkit.facade import Tavern

__all__ = ["EDITABLE_FIELDS", "FieldEdit", "apply_edits", "card_app", "propose_edits"]

card_app = typer.Typer(help="Work on stored character cards.", no_args_is_help=True)
out = Console(highlight=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)


@card_app.command("edit")
def edit(
    name: Annotated[str, typer.Argument(help="The stored character to edit.")],
    instruction: Annotated[str, typer.Argument(help="What to change, in plain words.")],
    profile: Annotated[str, typer.Option("--profile", help="Connection profile name.")] = "",
    preset: Annotated[str, typer.Option("--preset", help="Chat-completion preset name.")] = "",
    mode: Annotated[str, typer.Option("--mode", help="Function-call mode.")] = "auto",
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Apply without asking.")] = False,
    home: HomeOption = None,
) -> None:
    """Ask the model for edits to a card, show them as a diff, apply them on confirmation."""

    async def run() -> None:
        async with Tavern(home) as tk:
            card = await load_card(tk.runtime, name)
            edits, text = await propose_edits(
                tk.context(),
                card,
                instruction,
                api_preset_name=profile,
                llm_preset_name=preset,
                function_call_mode=mode,
            )
            if not edits:
                out.print("no changes proposed" + (f": {escape(text)}" if text.strip() else ""))
                return
            for item in edits:
                out.print(escape(item.diff()), end="")
                if item.reason:
                    out.print(f"[dim]# {escape(item.reason)}[/]")
            if yes or typer.confirm(f"Apply {len(edits)} change(s) to {name}?", default=False):
                await apply_edits(tk.runtime, name, edits)
                out.print(f"updated [bold]{escape(name)}[/]")
            else:
                out.print("nothing changed")

    try:
        asyncio.run(run())
    except (TavernKitError, GenerateTaskError) as exc:
        err.print(f"[bold red]{say('error:')}[/] {escape(error_text(exc))}")
        raise typer.Exit(1) from None
