"""The record commands of ``tavernkit``: ``import``, ``list``, ``show``, ``export``.

Plain functions: :mod:`tavernkit.cli` registers them by name and imports this module only when
one of them runs (``tavernkit --help`` stays cheap)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from tavernkit.cli._common import HomeOption, chat_row, run_in_tavern
from tavernkit.cli.error_text import error_text
from tavernkit.cli.language import say
from tavernkit.cli.render import render_found
from tavernkit.errors import NameTaken, TavernKitError
from tavernkit.facade import Tavern
from tavernkit.library_results import ImportResult

__all__ = ["export", "import_", "list_", "show"]

out = Console(highlight=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)

#: ``tavernkit list WHAT`` -> store kinds
_LIST_KINDS: dict[str, tuple[str, ...]] = {
    "characters": ("character",),
    "lorebooks": ("lorebook",),
    "presets": (
        "chat_preset",
        "textgen_preset",
        "kobold_preset",
        "novel_preset",
        "chatluna_preset",
    ),
    "templates": ("instruct", "context", "sysprompt", "reasoning"),
    "personas": ("persona",),
    "profiles": ("connection_profile",),
    "groups": ("group",),
    "chats": (),
}


def import_(
    files: Annotated[
        list[Path],
        typer.Argument(help="Cards, lorebooks, presets, templates, groups, chats."),
    ],
    character: Annotated[
        str | None, typer.Option("--character", "-c", help="Attach imported chats to this one.")
    ] = None,
    group: Annotated[
        str | None, typer.Option("--group", "-g", help="Import chats as this group's chats.")
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite a different record of the same name.")
    ] = False,
    home: HomeOption = None,
) -> None:
    """Import files; the format is recognised by content, not by extension."""

    async def action(tk: Tavern) -> int:
        # Files are independent: one bad file is reported and the others still import.
        failed = 0
        for path in files:
            try:
                results = await tk.library.import_file(
                    path, character=character, group=group, replace=replace
                )
            except NameTaken as exc:
                failed += 1
                said = escape(error_text(exc))
                err.print(f"[bold red]{say('error:')}[/] {said}; --replace overwrites it")
                continue
            except TavernKitError as exc:
                failed += 1
                err.print(f"[bold red]{say('error:')}[/] {escape(error_text(exc))}")
                continue
            for result in results:
                _print_import(result)
        return failed

    if run_in_tavern(home, action):
        raise typer.Exit(1)


def _print_import(result: ImportResult) -> None:
    note = f" [dim]({escape(result.note)})[/]" if result.note else ""
    out.print(f"{result.status:>9} {result.kind} [bold]{escape(result.name)}[/]{note}")


def list_(
    what: Annotated[
        str,
        typer.Argument(
            help="characters, lorebooks, presets, templates, personas, profiles, groups, chats"
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
    home: HomeOption = None,
) -> None:
    """List stored records."""
    if what not in _LIST_KINDS:
        err.print(
            f"[bold red]{say('error:')}[/] "
            + say(
                "cannot list {what}; choose one of {kinds}",
                what=repr(what),
                kinds=", ".join(_LIST_KINDS),
            )
        )
        raise typer.Exit(2)

    async def action(tk: Tavern) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        if what == "chats":
            return [chat_row(chat) for chat in await tk.store.list_chats(owner=tk.owner)]
        for kind in _LIST_KINDS[what]:
            for info in await tk.store.list(kind, owner=tk.owner):
                rows.append(
                    {
                        "kind": kind,
                        "name": info.name,
                        "id": info.id,
                        "updated": info.updated.isoformat(),
                    }
                )
        return rows

    rows = run_in_tavern(home, action)
    if as_json:
        for row in rows:
            out.print(json.dumps(row, ensure_ascii=False), markup=False, soft_wrap=True)
        return
    if not rows:
        out.print(f"[dim]no {what}[/]")
        return
    for row in rows:
        extra = ""
        if row["kind"] == "chat":
            extra = f" [dim]{escape(str(row['character'] or '-'))}, {row['messages']} messages[/]"
        elif len(_LIST_KINDS[what]) > 1:
            extra = f" [dim]{row['kind']}[/]"
        out.print(f"[bold]{escape(row['name'])}[/]{extra}")


def show(
    name: Annotated[str, typer.Argument(help="Name or id of a record.")],
    kind: Annotated[
        str | None, typer.Option("--kind", "-k", help="Look only at this kind (e.g. lorebook).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the stored JSON.")] = False,
    home: HomeOption = None,
) -> None:
    """Show a character, lorebook, preset, template, persona or chat."""

    async def action(tk: Tavern) -> None:
        found = await tk.library.find(name, kind=kind)
        if as_json:
            if found.kind == "chat":
                stored = await tk.store.load_chat(found.id, owner=tk.owner)
                data: Any = stored.lines()
            else:
                data = (await tk.store.get_record(found.kind, found.id, owner=tk.owner)).data
            out.print(json.dumps(data, ensure_ascii=False, indent=2), markup=False, soft_wrap=True)
            return
        await render_found(tk, found, out)

    run_in_tavern(home, action)


def export(
    name: Annotated[str, typer.Argument(help="Name or id of a record.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="png, json, charx or jsonl.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="File to write.")],
    kind: Annotated[
        str | None, typer.Option("--kind", "-k", help="Look only at this kind.")
    ] = None,
    spec: Annotated[str, typer.Option("--spec", help="Card JSON spec: v2 or v3.")] = "v2",
    home: HomeOption = None,
) -> None:
    """Export a record in SillyTavern's formats."""
    if spec not in ("v2", "v3"):
        err.print(f"[bold red]{say('error:')}[/] {say('--spec must be v2 or v3')}")
        raise typer.Exit(2)
    found = run_in_tavern(
        home, lambda tk: tk.library.export_file(name, fmt, output, kind=kind, spec=spec)
    )
    out.print(f"wrote {found.kind} [bold]{escape(found.name)}[/] to {escape(str(output))}")
