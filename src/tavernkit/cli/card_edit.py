"""``tavernkit card edit NAME "INSTRUCTION"``: a character-editor assistant on ``generate_task``.

The card's fields go to the model as JSON with ``substitute_macros=False``: the model must see
``{{user}}`` / ``{{char}}`` literally, or it could not keep them in what it writes back. It
answers by calling ``propose_edit`` (one call per field); the proposals are shown as a diff
and applied (the card stored back under the same record, avatar kept) only on confirmation.
"""

from __future__ import annotations

import asyncio
import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from tavernkit.context import TavernContext
from tavernkit.errors import GenerateTaskError, TavernKitError
from tavernkit.facade import Tavern
from tavernkit.models.character import Card

__all__ = ["EDITABLE_FIELDS", "FieldEdit", "apply_edits", "card_app", "propose_edits"]

card_app = typer.Typer(help="Work on stored character cards.", no_args_is_help=True)
out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

#: the text fields of a card the assistant may change
EDITABLE_FIELDS = (
    "name",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "system_prompt",
    "post_history_instructions",
    "creator_notes",
)

PROPOSE_EDIT = {
    "type": "function",
    "function": {
        "name": "propose_edit",
        "description": "Propose the complete new text of one card field.",
        "parameters": {
            "type": "object",
            "properties": {
                "field": {"type": "string", "enum": list(EDITABLE_FIELDS)},
                "new_value": {"type": "string"},
                "reason": {"type": "string"},
            },
            "required": ["field", "new_value"],
            "additionalProperties": False,
        },
    },
}

SYSTEM = (
    "You edit SillyTavern character cards. The card's fields are given as JSON. Apply the "
    "user's instruction by calling propose_edit once per field that must change, with the "
    "field's complete new text. Keep macros such as {{user}} and {{char}} exactly as written; "
    "never replace them with names. Change nothing the instruction does not ask for."
)


@dataclass(frozen=True, slots=True)
class FieldEdit:
    field: str
    old: str
    new: str
    reason: str = ""

    def diff(self) -> str:
        lines = difflib.unified_diff(
            self.old.splitlines(keepends=True),
            self.new.splitlines(keepends=True),
            fromfile=f"{self.field} (now)",
            tofile=f"{self.field} (proposed)",
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _fields(card: Card) -> dict[str, str]:
    data = card.data
    return {name: str(getattr(data, name) or "") for name in EDITABLE_FIELDS}


async def propose_edits(
    ctx: TavernContext, card: Card, instruction: str, **task_options: Any
) -> tuple[list[FieldEdit], str]:
    """The edits the model proposes for ``card`` and its explanation text."""
    current = _fields(card)
    result = await ctx.generate_task(
        [
            {"role": "system", "content": SYSTEM},
            {
                "role": "user",
                "content": "Card fields:\n"
                + json.dumps(current, ensure_ascii=False, indent=2)
                + f"\n\nInstruction: {instruction}",
            },
        ],
        include_character_card=False,
        substitute_macros=False,
        tools=[PROPOSE_EDIT],
        **task_options,
    )
    edits: dict[str, FieldEdit] = {}
    for call in result.tool_calls:
        field = call.args["field"]
        new = call.args["new_value"]
        if new != current[field]:
            edits[field] = FieldEdit(field, current[field], new, call.args.get("reason", ""))
    return list(edits.values()), result.assistant_text


async def apply_edits(tk: Tavern, ref: str, edits: list[FieldEdit]) -> Card:
    """Store the card ``ref`` with ``edits`` applied (same record; blobs kept; the V1
    duplicates are refreshed from ``data`` by the card writers on export)."""
    record = await tk.store.get_record("character", ref, owner=tk.owner)
    card = await tk.store.get("character", record.info.id, owner=tk.owner)
    assert isinstance(card, Card)
    for edit in edits:
        setattr(card.data, edit.field, edit.new)
    await tk.store.put("character", card, owner=tk.owner, id=record.info.id)
    return card


HomeOption = Annotated[
    Path | None,
    typer.Option("--home", help="Data folder (default: $TAVERNKIT_HOME or the user data dir)."),
]


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
            card = await tk.store.get("character", name, owner=tk.owner)
            if not isinstance(card, Card):
                raise TavernKitError(f"{name!r} is not a character card")
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
                await apply_edits(tk, name, edits)
                out.print(f"updated [bold]{escape(name)}[/]")
            else:
                out.print("nothing changed")

    try:
        asyncio.run(run())
    except (TavernKitError, GenerateTaskError) as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from None
