"""What every ``tavernkit`` sub-command shares: the ``--home`` option and running one action
in an open :class:`~tavernkit.facade.Tavern` with the CLI's error rule (one red line on
stderr, exit code 1)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar, get_type_hints

import typer
from rich.console import Console
from rich.markup import escape

from tavernkit.cli.error_text import error_text
from tavernkit.cli.language import say
from tavernkit.errors import TavernKitError
from tavernkit.facade import Tavern
from tavernkit.store.chat_types import ChatInfo

__all__ = ["HomeOption", "chat_row", "fail", "gathered", "run_in_tavern"]

T = TypeVar("T")
Opts = TypeVar("Opts")

HomeOption = Annotated[
    Path | None,
    typer.Option("--home", help="Data folder (default: $TAVERNKIT_HOME or the user data dir)."),
]

_err = Console(stderr=True, highlight=False, soft_wrap=True)


def gathered(options_type: type[Opts]) -> Callable[[Callable[[Opts], None]], Callable[..., None]]:
    """A command of many options written as a function of one value: the command's
    parameters are the fields of the dataclass ``options_type`` (each ``Annotated`` with its
    ``typer.Option``, its default the field's), and the function receives them as one
    ``options_type``. Typer reads the signature, so ``--help``, the environment variables
    and the checks are the fields' own."""
    hints = get_type_hints(options_type, include_extras=True)
    parameters = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            # a field without a default is a required argument
            default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
            annotation=hints[f.name],
        )
        for f in dataclasses.fields(options_type)  # type: ignore[arg-type]
    ]

    def wrap(command: Callable[[Opts], None]) -> Callable[..., None]:
        @functools.wraps(command)
        def run(**values: Any) -> None:
            command(options_type(**values))

        del run.__wrapped__  # typer reads the signature below, not the wrapped function's
        run.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
        run.__annotations__ = {**{p.name: p.annotation for p in parameters}, "return": None}
        return run

    return wrap


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
        raise fail(error_text(exc)) from None


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
