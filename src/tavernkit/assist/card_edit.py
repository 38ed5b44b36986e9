"""A character-editor assistant on ``generate_task`` (``tavernkit card edit`` is its CLI face).

The card's fields go to the model as JSON with ``substitute_macros=False``: the model must see
``{{user}}`` / ``{{char}}`` literally, or it could not keep them in what it writes back. It
answers by calling ``propose_edit`` (one call per field); :func:`propose_edits` returns the
proposals as :class:`FieldEdit` values (each with its diff) and :func:`apply_edits` stores them
(the same record, avatar kept). Nothing is stored without the caller deciding to.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from tavernkit.context import TavernContext
from tavernkit.errors import TavernKitError
from tavernkit.models.character import Card
from tavernkit.runtime import Runtime

__all__ = [
    "EDITABLE_FIELDS",
    "PROPOSE_EDIT",
    "FieldEdit",
    "apply_edits",
    "load_card",
    "propose_edits",
]

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
        # the arguments were validated against PROPOSE_EDIT's schema by generate_task
        field = call.args["field"]
        new = call.args["new_value"]
        if new != current[field]:
            edits[field] = FieldEdit(field, current[field], new, call.args.get("reason", ""))
    return list(edits.values()), result.assistant_text


async def apply_edits(runtime: Runtime, ref: str, edits: list[FieldEdit]) -> Card:
    """Store the card ``ref`` with ``edits`` applied (same record; blobs kept; the V1
    duplicates are refreshed from ``data`` by the card writers on export)."""
    record = await runtime.store.get_record("character", ref, owner=runtime.owner)
    card = await runtime.store.get("character", record.info.id, owner=runtime.owner)
    if not isinstance(card, Card):
        raise TavernKitError(f"{ref!r} is not a character card")
    for edit in edits:
        setattr(card.data, edit.field, edit.new)
    await runtime.store.put("character", card, owner=runtime.owner, id=record.info.id)
    return card


async def load_card(runtime: Runtime, ref: str) -> Card:
    """The stored character ``ref`` (name or id), or a one-line error."""
    card = await runtime.store.get("character", ref, owner=runtime.owner)
    if not isinstance(card, Card):
        raise TavernKitError(f"{ref!r} is not a character card")
    return card
