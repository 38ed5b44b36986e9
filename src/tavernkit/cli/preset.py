"""``tavernkit preset``: the prompt manager of a stored chat-completion preset.

Each command loads the preset, applies one edit from :mod:`tavernkit.prompt.preset_edit` and
stores it back under the same record, still in SillyTavern's format (``tavernkit export`` writes
a file SillyTavern imports). Errors are one line on stderr with exit code 1.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tavernkit.cli._common import HomeOption, gathered, run_in_tavern
from tavernkit.cli.language import say
from tavernkit.errors import TavernKitError
from tavernkit.facade import Tavern
from tavernkit.models.preset import INJECTION_ABSOLUTE, ChatCompletionPreset
from tavernkit.prompt import preset_edit

__all__ = ["preset_app"]

preset_app = typer.Typer(
    help="Show and edit a chat-completion preset's prompts (SillyTavern's prompt manager).",
    no_args_is_help=True,
)
out = Console(highlight=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)

KIND = "chat_preset"

PresetArg = Annotated[str, typer.Argument(help="Name or id of a stored chat preset.")]
PromptArg = Annotated[str, typer.Argument(help="Prompt identifier (e.g. main, jailbreak).")]


async def _load(tk: Tavern, name: str) -> tuple[str, str, ChatCompletionPreset]:
    record = await tk.store.get_record(KIND, name, owner=tk.owner)
    preset = await tk.store.get(KIND, record.info.id, owner=tk.owner)
    if not isinstance(preset, ChatCompletionPreset):
        raise TavernKitError(f"{name!r} is not a chat-completion preset")
    return record.info.id, record.info.name, preset


def _edit(
    home: Path | None,
    name: str,
    change: Callable[[ChatCompletionPreset], ChatCompletionPreset],
) -> ChatCompletionPreset:
    async def action(tk: Tavern) -> ChatCompletionPreset:
        record_id, record_name, preset = await _load(tk, name)
        edited = change(preset)
        await tk.store.put(KIND, edited, owner=tk.owner, name=record_name, id=record_id)
        return edited

    result: ChatCompletionPreset = run_in_tavern(home, action)
    return result


def _rows(preset: ChatCompletionPreset) -> list[dict[str, Any]]:
    rows = []
    for position, item in enumerate(preset.active_order()):
        prompt = preset.prompt(item.identifier)
        in_chat = prompt is not None and prompt.injection_position == INJECTION_ABSOLUTE
        rows.append(
            {
                "position": position,
                "identifier": item.identifier,
                "name": prompt.name if prompt else "",
                "enabled": item.enabled,
                "role": prompt.role if prompt else "",
                "marker": bool(prompt and prompt.marker),
                "in_chat": in_chat,
                "depth": prompt.injection_depth if prompt and in_chat else None,
                "order": prompt.injection_order if prompt and in_chat else None,
                "triggers": list(prompt.injection_trigger) if prompt else [],
                "content": prompt.content if prompt else "",
            }
        )
    return rows


@preset_app.command("show")
def show(
    name: PresetArg,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
    home: HomeOption = None,
) -> None:
    """The prompt order: what is sent, in which order, where and as which role."""

    async def action(tk: Tavern) -> list[dict[str, Any]]:
        return _rows((await _load(tk, name))[2])

    rows: list[dict[str, Any]] = run_in_tavern(home, action)
    if as_json:
        for row in rows:
            out.print(json.dumps(row, ensure_ascii=False), markup=False, soft_wrap=True)
        return
    table = Table("#", "identifier", "name", "on", "role", "where", "content")
    for row in rows:
        where = f"in chat @{row['depth']} (order {row['order']})" if row["in_chat"] else "relative"
        content = "[marker]" if row["marker"] else row["content"].replace("\n", " ")
        table.add_row(
            str(row["position"]),
            escape(row["identifier"]),
            escape(row["name"]),
            "yes" if row["enabled"] else "no",
            row["role"],
            where,
            escape(content[:60] + ("…" if len(content) > 60 else "")),
        )
    out.print(table)


@preset_app.command("toggle")
def toggle(
    name: PresetArg,
    identifier: PromptArg,
    on: Annotated[bool | None, typer.Option("--on/--off", help="Set instead of flipping.")] = None,
    home: HomeOption = None,
) -> None:
    """Switch a prompt on or off (flips it unless --on or --off is given)."""
    state: dict[str, bool] = {}

    def change(preset: ChatCompletionPreset) -> ChatCompletionPreset:
        current = next(
            (i.enabled for i in preset.active_order() if i.identifier == identifier), False
        )
        state["enabled"] = (not current) if on is None else on
        return preset_edit.set_enabled(preset, identifier, state["enabled"])

    _edit(home, name, change)
    out.print(f"{escape(identifier)} {'enabled' if state['enabled'] else 'disabled'}")


@preset_app.command("move")
def move(
    name: PresetArg,
    identifier: PromptArg,
    position: Annotated[
        int | None,
        typer.Argument(help="New place in the order (0 first; -1 last, written after --)."),
    ] = None,
    after: Annotated[
        str | None, typer.Option("--after", help="Put it right after this prompt.")
    ] = None,
    home: HomeOption = None,
) -> None:
    """Move a prompt within the prompt order."""
    if (position is None) == (after is None):
        err.print(f"[bold red]{say('error:')}[/] {say('give either a POSITION or --after')}")
        raise typer.Exit(2)

    def change(preset: ChatCompletionPreset) -> ChatCompletionPreset:
        target = position
        if after is not None:
            order = [i.identifier for i in preset.active_order() if i.identifier != identifier]
            if after not in order:
                raise preset_edit.PresetEditError(f"{after!r} is not in the prompt order")
            target = order.index(after) + 1
        assert target is not None
        return preset_edit.move_prompt(preset, identifier, target)

    edited = _edit(home, name, change)
    index = [i.identifier for i in edited.active_order()].index(identifier)
    out.print(f"{escape(identifier)} is now at position {index}")


@dataclass(frozen=True)
class PresetSetOptions:
    """``tavernkit preset set``'s arguments and options (``--help`` lists them)."""

    name: PresetArg
    identifier: PromptArg
    position: Annotated[str | None, typer.Option("--position", help="relative or in_chat.")] = None
    depth: Annotated[int | None, typer.Option("--depth", help="In-chat depth.")] = None
    order: Annotated[int | None, typer.Option("--order", help="In-chat order.")] = None
    role: Annotated[str | None, typer.Option("--role", help="system, user or assistant.")] = None
    trigger: Annotated[
        list[str] | None,
        typer.Option("--trigger", help="Generation type that sends it (repeat; none = all)."),
    ] = None
    all_triggers: Annotated[
        bool, typer.Option("--all-triggers", help="Send it for every generation type.")
    ] = False
    content: Annotated[str | None, typer.Option("--content", help="New prompt text.")] = None
    title: Annotated[str | None, typer.Option("--name", help="New display name.")] = None
    home: HomeOption = None


@preset_app.command("set")
@gathered(PresetSetOptions)
def set_(options: PresetSetOptions) -> None:
    """Change where a prompt goes (position, depth, order, role, triggers) or its text."""
    o = options
    if (
        all(
            v is None for v in (o.position, o.depth, o.order, o.role, o.trigger, o.content, o.title)
        )
        and not o.all_triggers
    ):
        err.print(f"[bold red]{say('error:')}[/] {say('nothing to set')}")
        raise typer.Exit(2)

    def change(preset: ChatCompletionPreset) -> ChatCompletionPreset:
        triggers = [] if o.all_triggers else o.trigger
        preset = preset_edit.set_injection(
            preset,
            o.identifier,
            position=o.position,
            depth=o.depth,
            order=o.order,
            role=o.role,
            triggers=triggers,
        )
        if o.content is not None or o.title is not None:
            preset = preset_edit.set_content(preset, o.identifier, content=o.content, name=o.title)
        return preset

    _edit(o.home, o.name, change)
    out.print(f"updated {escape(o.identifier)}")


@dataclass(frozen=True)
class PresetAddOptions:
    """``tavernkit preset add``'s arguments and options (``--help`` lists them)."""

    name: PresetArg
    identifier: PromptArg
    content: Annotated[str, typer.Option("--content", help="The prompt text.")]
    title: Annotated[
        str | None, typer.Option("--name", help="Display name (default: the identifier).")
    ] = None
    role: Annotated[str, typer.Option("--role", help="system, user or assistant.")] = "system"
    in_chat: Annotated[bool, typer.Option("--in-chat", help="Inject it into the chat.")] = False
    depth: Annotated[int, typer.Option("--depth", help="In-chat depth.")] = 4
    order: Annotated[int, typer.Option("--order", help="In-chat order.")] = 100
    after: Annotated[
        str | None, typer.Option("--after", help="Place it after this prompt (default: last).")
    ] = None
    disabled: Annotated[bool, typer.Option("--disabled", help="Add it switched off.")] = False
    home: HomeOption = None


@preset_app.command("add")
@gathered(PresetAddOptions)
def add(options: PresetAddOptions) -> None:
    """Add a custom prompt."""
    o = options

    def change(preset: ChatCompletionPreset) -> ChatCompletionPreset:
        return preset_edit.add_prompt(
            preset,
            o.identifier,
            name=o.title or o.identifier,
            content=o.content,
            role=o.role,
            in_chat=o.in_chat,
            depth=o.depth,
            order=o.order,
            enabled=not o.disabled,
            after=o.after,
        )

    _edit(o.home, o.name, change)
    out.print(f"added {escape(o.identifier)}")


@preset_app.command("remove")
def remove(name: PresetArg, identifier: PromptArg, home: HomeOption = None) -> None:
    """Delete a custom prompt (built-in prompts can only be switched off)."""
    _edit(home, name, lambda preset: preset_edit.remove_prompt(preset, identifier))
    out.print(f"removed {escape(identifier)}")
