"""``tavernkit group …``: make and edit groups (who is in them, who is muted, how they reply).

Each command is one store edit (:mod:`tavernkit.groups.records`); names are checked before
anything is written. Chat with a group with ``tavernkit chat --group NAME``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from tavernkit.cli._common import HomeOption, fail, run_in_tavern
from tavernkit.facade import Tavern
from tavernkit.groups.records import LoadedGroup, create_group, edit_group, member_avatar
from tavernkit.models.group import ActivationStrategy, GenerationMode

__all__ = ["group_app"]

out = Console(highlight=False, soft_wrap=True)

group_app = typer.Typer(
    help="Groups: members, mutes and reply strategy (chat with one: chat --group).",
    no_args_is_help=True,
)

_STRATEGIES = {s.name.lower(): s for s in ActivationStrategy}
_MODES = {"swap": GenerationMode.SWAP, "join": GenerationMode.APPEND}
_MODES["join-muted"] = GenerationMode.APPEND_DISABLED
_MODE_NAMES = {mode: name for name, mode in _MODES.items()}

StrategyOption = Annotated[
    str | None,
    typer.Option("--strategy", "-s", help="natural, list, manual or pooled (who replies)."),
]
ModeOption = Annotated[
    str | None,
    typer.Option("--mode", help="swap (the speaker's card), join, or join-muted (every card)."),
]


def _strategy(value: str) -> int:
    found = _STRATEGIES.get(value.lower())
    if found is None:
        raise fail(f"unknown strategy {value!r}; choose one of {', '.join(_STRATEGIES)}")
    return int(found)


def _mode(value: str) -> int:
    found = _MODES.get(value.lower())
    if found is None:
        raise fail(f"unknown mode {value!r}; choose one of {', '.join(_MODES)}")
    return int(found)


def _summary(loaded: LoadedGroup) -> str:
    group = loaded.group
    strategy = group.strategy.name.lower() if group.strategy is not None else "none"
    names = ", ".join(f"{m.name} (muted)" if m.muted else m.name for m in loaded.members)
    missing = f"; not found: {', '.join(loaded.missing)}" if loaded.missing else ""
    return (
        f"[bold]{escape(group.name)}[/]: {escape(names) or 'no members'}{escape(missing)} "
        f"[dim]({strategy}, {_MODE_NAMES[group.mode]})[/]"
    )


@group_app.command("create")
def group_create(
    name: Annotated[str, typer.Argument(help="The group's name.")],
    members: Annotated[list[str], typer.Argument(help="Characters, in reply order.")],
    strategy: StrategyOption = None,
    mode: ModeOption = None,
    self_responses: Annotated[
        bool, typer.Option("--self", help="A member may reply to itself (natural order).")
    ] = False,
    home: HomeOption = None,
) -> None:
    """Make a group of stored characters."""
    fields: dict[str, object] = {"allow_self_responses": self_responses}
    if strategy is not None:
        fields["activation_strategy"] = _strategy(strategy)
    if mode is not None:
        fields["generation_mode"] = _mode(mode)

    async def action(tk: Tavern) -> LoadedGroup:
        return await create_group(
            tk.store,
            name,
            members,
            owner=tk.owner,
            created_ms=int(time.time() * 1000),
            **fields,
        )

    out.print("created " + _summary(run_in_tavern(home, action)))


def _edit(home: HomeOption, name: str, change: Callable[[LoadedGroup], None]) -> None:
    async def action(tk: Tavern) -> LoadedGroup:
        return await edit_group(tk.store, name, change, owner=tk.owner)

    out.print(_summary(run_in_tavern(home, action)))


@group_app.command("add")
def group_add(
    name: Annotated[str, typer.Argument(help="The group.")],
    character: Annotated[str, typer.Argument(help="A stored character.")],
    home: HomeOption = None,
) -> None:
    """Add a member (first in the list, as SillyTavern adds one)."""

    async def action(tk: Tavern) -> LoadedGroup:
        avatar = await member_avatar(tk.store, character, owner=tk.owner)

        def change(loaded: LoadedGroup) -> None:
            if avatar in loaded.group.members:
                raise fail(f"{character} is in {loaded.group.name} already")
            loaded.group.members = [avatar, *loaded.group.members]

        return await edit_group(tk.store, name, change, owner=tk.owner)

    out.print(_summary(run_in_tavern(home, action)))


@group_app.command("remove")
def group_remove(
    name: Annotated[str, typer.Argument(help="The group.")],
    member: Annotated[str, typer.Argument(help="A member (name, or number from 0).")],
    home: HomeOption = None,
) -> None:
    """Take a member out of the group (its past messages stay)."""

    def change(loaded: LoadedGroup) -> None:
        avatar = loaded.member(member).avatar
        group = loaded.group
        group.members = [m for m in group.members if m != avatar]
        group.disabled_members = [m for m in group.disabled_members if m != avatar]

    _edit(home, name, change)


def _set_muted(home: HomeOption, name: str, member: str, muted: bool) -> None:
    def change(loaded: LoadedGroup) -> None:
        avatar = loaded.member(member).avatar
        group = loaded.group
        others = [m for m in group.disabled_members if m != avatar]
        group.disabled_members = [*others, avatar] if muted else others

    _edit(home, name, change)


@group_app.command("mute")
def group_mute(
    name: Annotated[str, typer.Argument(help="The group.")],
    member: Annotated[str, typer.Argument(help="A member (name, or number from 0).")],
    home: HomeOption = None,
) -> None:
    """Mute a member: never drafted (``/trigger`` still reaches it)."""
    _set_muted(home, name, member, True)


@group_app.command("unmute")
def group_unmute(
    name: Annotated[str, typer.Argument(help="The group.")],
    member: Annotated[str, typer.Argument(help="A member (name, or number from 0).")],
    home: HomeOption = None,
) -> None:
    """Let a muted member reply again."""
    _set_muted(home, name, member, False)


@group_app.command("set")
def group_set(
    name: Annotated[str, typer.Argument(help="The group.")],
    strategy: StrategyOption = None,
    mode: ModeOption = None,
    self_responses: Annotated[
        bool | None,
        typer.Option("--self/--no-self", help="Whether a member may reply to itself."),
    ] = None,
    prefix: Annotated[
        str | None, typer.Option("--prefix", help="Join mode: text before each member's field.")
    ] = None,
    suffix: Annotated[
        str | None, typer.Option("--suffix", help="Join mode: text after each member's field.")
    ] = None,
    home: HomeOption = None,
) -> None:
    """Change how the group replies (strategy, card mode, self responses, join text)."""
    strategy_value = _strategy(strategy) if strategy is not None else None
    mode_value = _mode(mode) if mode is not None else None

    def change(loaded: LoadedGroup) -> None:
        group = loaded.group
        if strategy_value is not None:
            group.activation_strategy = strategy_value
        if mode_value is not None:
            group.generation_mode = mode_value
        if self_responses is not None:
            group.allow_self_responses = self_responses
        if prefix is not None:
            group.generation_mode_join_prefix = prefix
        if suffix is not None:
            group.generation_mode_join_suffix = suffix

    _edit(home, name, change)
