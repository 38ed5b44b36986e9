"""``tavernkit memory …``: the memory settings (vectorized world info, chat memory, the rolling
summary) and a chat's summary, as the server's ``/memory`` routes change them
(:mod:`tavernkit.assist.memory_settings`).

``memory set vectors.enabled_chats=true summary.source=main`` sets those keys only (values
are JSON, or text when they are not); a key that does not exist or a value it does not take
is a one-line error, and nothing is stored then.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from tavernkit.assist.memory_settings import memory_settings, update_memory_settings
from tavernkit.assist.summary import current_summary, set_summary
from tavernkit.cli._common import HomeOption, parse_assignments, run_in_tavern
from tavernkit.facade import Tavern
from tavernkit.models.memory import MemorySettings

__all__ = ["memory_app"]

out = Console(highlight=False, soft_wrap=True)

memory_app = typer.Typer(
    help="Memory: vectorized entries, chat memory and the rolling summary.",
    no_args_is_help=True,
)


def _print(settings: MemorySettings) -> None:
    out.print_json(json.dumps(settings.model_dump(mode="json", by_alias=True)))


@memory_app.command("show")
def memory_show(home: HomeOption = None) -> None:
    """The memory settings (Summarize's keys as SillyTavern spells them)."""

    async def action(tk: Tavern) -> MemorySettings:
        return await memory_settings(tk.runtime)

    _print(run_in_tavern(home, action))


@memory_app.command("set")
def memory_set(
    assignments: Annotated[
        list[str], typer.Argument(help="section.key=value, e.g. summary.source=main.")
    ],
    home: HomeOption = None,
) -> None:
    """Set memory settings; the others keep their values."""
    changes = parse_assignments(assignments, example="vectors.enabled_chats=true")

    async def action(tk: Tavern) -> MemorySettings:
        return await update_memory_settings(tk.runtime, changes)

    _print(run_in_tavern(home, action))


@memory_app.command("summary")
def memory_summary(
    chat: Annotated[str, typer.Argument(help="The chat (id or name).")],
    text: Annotated[
        str | None, typer.Option("--set", help="Replace the summary with this text.")
    ] = None,
    home: HomeOption = None,
) -> None:
    """Show a chat's summary (what the next turn injects), or replace it with ``--set``."""

    async def action(tk: Tavern) -> str:
        info = await tk.store.get_chat_info(chat, owner=tk.owner)
        if text is not None:
            index = await set_summary(tk.runtime, info.id, text)
            return f"summary stored on message {index}"
        return await current_summary(tk.runtime, info.id) or "(no summary)"

    out.print(escape(run_in_tavern(home, action)))
