"""``tavernkit regex …``: the owner's regex scripts (SillyTavern's Regex extension) and the
cards whose embedded scripts may run (:mod:`tavernkit.regex_admin`).

``regex add NAME FIND [REPLACE]`` makes a global script as SillyTavern's editor would (user
input only and display only unless told otherwise); ``regex import FILE`` reads
SillyTavern's export files; ``regex allow CARD`` lets a card's own scripts run (what
SillyTavern asks when such a card is opened), ``--revoke`` stops them again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from tavernkit.cli._common import HomeOption, fail, gathered, run_in_tavern
from tavernkit.facade import Tavern
from tavernkit.formats.file_io import load_json
from tavernkit.models.regex_script import ALLOW_QUESTION, RegexScript
from tavernkit.regex_admin import CardScripts
from tavernkit.text.regex_scripts import RegexPlacement

__all__ = ["regex_app"]

out = Console(highlight=False, soft_wrap=True)

regex_app = typer.Typer(
    help="Regex scripts: find/replace rules on input, replies, world info and reasoning.",
    no_args_is_help=True,
)

#: ``--placement`` words -> SillyTavern's placement numbers
PLACEMENTS = {
    "user": RegexPlacement.USER_INPUT,
    "ai": RegexPlacement.AI_OUTPUT,
    "slash": RegexPlacement.SLASH_COMMAND,
    "wi": RegexPlacement.WORLD_INFO,
    "reasoning": RegexPlacement.REASONING,
}
_NAMES = {int(v): k for k, v in PLACEMENTS.items()}
SUBSTITUTE = {"none": 0, "raw": 1, "escaped": 2}


def _describe(script: RegexScript) -> tuple[str, str, str, str]:
    placement = script.placement if isinstance(script.placement, list) else []
    where = ",".join(_NAMES.get(p, str(p)) for p in placement) or "-"
    if script.markdown_only and script.prompt_only:
        scope = "display+prompt"
    elif script.markdown_only:
        scope = "display only"
    elif script.prompt_only:
        scope = "prompt only"
    else:
        scope = "stored"
    return str(script.find_regex), where, scope, "on" if script.enabled else "off"


def _table(title: str, scripts: list[RegexScript]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("#", "name", "find", "placement", "applies to", "state"):
        table.add_column(column)
    for index, script in enumerate(scripts):
        # Text cells: a pattern's brackets and backslashes are not markup
        table.add_row(str(index), Text(script.script_name), *map(Text, _describe(script)))
    return table


@regex_app.command("list")
def regex_list(
    as_json: Annotated[bool, typer.Option("--json", help="SillyTavern's JSON.")] = False,
    home: HomeOption = None,
) -> None:
    """The global scripts in their run order, and the allowed cards and presets."""

    async def action(tk: Tavern) -> Any:
        return await tk.regex.settings()

    settings = run_in_tavern(home, action)
    if as_json:
        out.print_json(json.dumps([s.to_wire() for s in settings.scripts]))
        return
    if not settings.enabled:
        out.print("[bold]regex scripts are off[/] (tavernkit regex enable --all)")
    if settings.scripts:
        out.print(_table("global scripts", settings.scripts))
    else:
        out.print("no global scripts")
    if settings.allowed_characters:
        out.print("allowed characters: " + escape(", ".join(settings.allowed_characters)))
    if settings.allowed_presets:
        out.print("allowed presets: " + escape(", ".join(settings.allowed_presets)))


@dataclass(frozen=True)
class RegexAddOptions:
    """``tavernkit regex add``'s arguments and options (``--help`` lists them)."""

    name: Annotated[str, typer.Argument(help="The script's name.")]
    find: Annotated[str, typer.Argument(help="The pattern: /body/flags, or a bare body.")]
    replace: Annotated[str, typer.Argument(help="The replacement ({{match}}, $1...).")] = ""
    placement: Annotated[
        list[str] | None,
        typer.Option(
            "--placement", "-p", help="user, ai, slash, wi, reasoning (repeat; default: user)."
        ),
    ] = None
    applies: Annotated[
        str,
        typer.Option(
            "--applies",
            help="display (shown only: the default), prompt (sent only), both, or stored.",
        ),
    ] = "display"
    trim: Annotated[
        list[str] | None, typer.Option("--trim", help="Text removed from inserted groups.")
    ] = None
    min_depth: Annotated[int | None, typer.Option("--min-depth")] = None
    max_depth: Annotated[int | None, typer.Option("--max-depth")] = None
    substitute: Annotated[
        str, typer.Option("--macros", help="Macros in the pattern: none, raw or escaped.")
    ] = "none"
    run_on_edit: Annotated[bool, typer.Option("--run-on-edit/--not-on-edit")] = True
    disabled: Annotated[bool, typer.Option("--disabled", help="Add it turned off.")] = False
    home: HomeOption = None


@regex_app.command("add")
@gathered(RegexAddOptions)
def regex_add(options: RegexAddOptions) -> None:
    """Add a global script (it runs after the ones already there)."""
    o = options
    try:
        places = [int(PLACEMENTS[p]) for p in (o.placement or ["user"])]
    except KeyError as exc:
        raise fail(f"unknown placement {exc.args[0]!r} (use {', '.join(PLACEMENTS)})") from None
    if o.applies not in ("display", "prompt", "both", "stored"):
        raise fail("--applies takes display, prompt, both or stored")
    if o.substitute not in SUBSTITUTE:
        raise fail("--macros takes none, raw or escaped")
    form: dict[str, Any] = {
        "scriptName": o.name,
        "findRegex": o.find,
        "replaceString": o.replace,
        "trimStrings": list(o.trim or []),
        "placement": places,
        "disabled": o.disabled,
        "markdownOnly": o.applies in ("display", "both"),
        "promptOnly": o.applies in ("prompt", "both"),
        "runOnEdit": o.run_on_edit,
        "substituteRegex": SUBSTITUTE[o.substitute],
        "minDepth": o.min_depth,
        "maxDepth": o.max_depth,
    }

    async def action(tk: Tavern) -> RegexScript:
        return await tk.regex.add(form)

    script = run_in_tavern(o.home, action)
    out.print(f"added {escape(script.script_name)} ({script.id})")


@regex_app.command("remove")
def regex_remove(
    name: Annotated[str, typer.Argument(help="The script (name or id).")],
    home: HomeOption = None,
) -> None:
    """Delete a global script."""

    async def action(tk: Tavern) -> None:
        await tk.regex.delete(name)

    run_in_tavern(home, action)
    out.print(f"removed {escape(name)}")


def _set_enabled(name: str | None, every: bool, enabled: bool, home: Path | None) -> None:
    if every == (name is not None):
        raise fail("name a script, or use --all for the whole extension")

    async def action(tk: Tavern) -> str:
        if name is None:
            await tk.regex.set_extension_enabled(enabled)
            return "regex scripts are " + ("on" if enabled else "off")
        script = await tk.regex.set_enabled(name, enabled)
        return f"{script.script_name} is " + ("on" if enabled else "off")

    out.print(escape(run_in_tavern(home, action)))


@regex_app.command("enable")
def regex_enable(
    name: Annotated[str | None, typer.Argument(help="The script (name or id).")] = None,
    every: Annotated[bool, typer.Option("--all", help="Turn the extension on.")] = False,
    home: HomeOption = None,
) -> None:
    """Turn a global script on (or, with --all, every regex script)."""
    _set_enabled(name, every, True, home)


@regex_app.command("disable")
def regex_disable(
    name: Annotated[str | None, typer.Argument(help="The script (name or id).")] = None,
    every: Annotated[bool, typer.Option("--all", help="Turn the extension off.")] = False,
    home: HomeOption = None,
) -> None:
    """Turn a global script off (or, with --all, every regex script)."""
    _set_enabled(name, every, False, home)


@regex_app.command("import")
def regex_import(
    path: Annotated[Path, typer.Argument(help="A script file (one object or a list).")],
    home: HomeOption = None,
) -> None:
    """Import SillyTavern regex script files into the global list (fresh ids)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise fail(f"{path}: {exc.strerror or exc}") from None

    async def action(tk: Tavern) -> list[RegexScript]:
        return await tk.regex.import_scripts(load_json(raw, source=str(path)), source=str(path))

    for script in run_in_tavern(home, action):
        out.print(f"imported {escape(script.script_name)} ({script.id})")


@regex_app.command("export")
def regex_export(
    name: Annotated[
        str | None, typer.Argument(help="One script (name or id); default: every one.")
    ] = None,
    to: Annotated[Path | None, typer.Option("--out", "-o", help="Write to this file.")] = None,
    home: HomeOption = None,
) -> None:
    """Print (or write) SillyTavern's export file of a script, or of the whole list."""

    async def action(tk: Tavern) -> tuple[str, str]:
        return await tk.regex.export(name)

    filename, text = run_in_tavern(home, action)
    if to is None:
        print(text)
        return
    target = to / filename if to.is_dir() else to
    target.write_text(text, encoding="utf-8")
    out.print(f"wrote {escape(str(target))}")


@regex_app.command("allow")
def regex_allow(
    card: Annotated[str, typer.Argument(help="The character (name or id).")],
    revoke: Annotated[bool, typer.Option("--revoke", help="Stop its scripts again.")] = False,
    home: HomeOption = None,
) -> None:
    """Let a character card's embedded scripts run (they are off until allowed)."""

    async def action(tk: Tavern) -> CardScripts:
        return await tk.regex.allow_character(card, not revoke)

    found = run_in_tavern(home, action)
    if not found.scripts:
        out.print(f"{escape(found.name)} has no embedded regex scripts")
    else:
        out.print(_table(f"{found.name}'s scripts", found.scripts))
    state = "run" if found.allowed else "do not run"
    out.print(f"{escape(found.name)}'s scripts {state} now")


@regex_app.command("card")
def regex_card(
    card: Annotated[str, typer.Argument(help="The character (name or id).")],
    home: HomeOption = None,
) -> None:
    """A character card's embedded scripts and whether they run."""

    async def action(tk: Tavern) -> CardScripts:
        return await tk.regex.character_scripts(card)

    found = run_in_tavern(home, action)
    if not found.scripts:
        out.print(f"{escape(found.name)} has no embedded regex scripts")
        return
    out.print(_table(f"{found.name}'s scripts", found.scripts))
    if found.allowed:
        out.print("allowed: they run")
    else:
        out.print(f"{ALLOW_QUESTION} (tavernkit regex allow {escape(found.name)})")
