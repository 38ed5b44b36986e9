"""What every ``tavernkit`` sub-command shares: the ``--home`` option and running one action
in an open :class:`~tavernkit.facade.Tavern` with the CLI's error rule (one red line on
stderr, exit code 1)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from tavernkit.cli.language import say
from tavernkit.errors import TavernKitError
from tavernkit.facade import Tavern
from tavernkit.store.protocol import ChatInfo

__all__ = ["HomeOption", "chat_row", "fail", "run_in_tavern"]

T = TypeVar("T")

HomeOption = Annotated[
    Path | None,
    typer.Option("--home", help="Data folder (default: $TAVERNKIT_HOME or the user data dir)."),
]

_err = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str) -> typer.Exit:
    """Print ``message`` as the command's one error line; raise what it returns."""
    _err.print(f"[bold red]{say('error:')}[/] {escape(message)}")
    return typer.Exit(1)


def run_in_tavern(home: Path | None, action: Callable[[Tavern], Awaitable[T]]) -> T:
    """``action`` on the Tavern at ``home``; a :class:`TavernKitError` ends the command."""

    async def runner() -> T:
        async with Tavern(home) as tk:
            return await action(tk)

    try:
        return asyncio.run(runner())
    except TavernKitError as exc:
        raise fail(str(exc)) from None


def chat_row(info: ChatInfo) -> dict[str, Any]:
    """A chat as ``list chats --json`` and ``chats list --json`` print it."""
    return {
        "kind": "chat",
        "name": info.name,
        "id": info.id,
        "character": info.character_name,
        "messages": info.message_count,
        "updated": info.updated.isoformat(),
    }


def json_value(text: str) -> Any:
    """A value typed on the command line: JSON, or the text itself when it is not."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text  # a template or a name: plain text


def parse_assignments(
    assignments: list[str], *, example: str, scalars: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``section.key=value`` words (and ``name=value`` for the top-level ``scalars``) as
    ``{section: {key: value}}``; a word of another shape fails naming it."""
    changes: dict[str, Any] = {}
    for word in assignments:
        target, eq, value = word.partition("=")
        if eq and target in scalars:
            changes[target] = value
            continue
        section, dot, key = target.partition(".")
        if not eq or not dot or not section or not key or section in scalars:
            raise fail(f"{word!r}: write section.key=value (e.g. {example})")
        changes.setdefault(section, {})[key] = json_value(value)
    return changes
