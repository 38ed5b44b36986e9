"""The staples outside a chat: ``tavernkit persona …``, ``tavernkit chats …`` and
``tavernkit character …``. Each command is one library call (:mod:`tavernkit.chat.personas`,
:mod:`tavernkit.chat.search`, :class:`~tavernkit.library.Library`); names are checked before
anything is written, and deleting asks first unless ``--yes``."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from tavernkit.chat.lorebooks import attach_character_lorebook, detach_character_lorebook
from tavernkit.chat.personas import Personas
from tavernkit.chat.search import search_chats
from tavernkit.cli._common import HomeOption, chat_row, fail, run_in_tavern
from tavernkit.facade import Tavern

__all__ = ["character_app", "chats_app", "persona_app"]

out = Console(highlight=False, soft_wrap=True)

persona_app = typer.Typer(help="Personas: who you speak as.", no_args_is_help=True)
chats_app = typer.Typer(help="Chats: list, rename, delete, search.", no_args_is_help=True)
character_app = typer.Typer(
    help="Characters: rename, duplicate, delete, lorebooks.", no_args_is_help=True
)

YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
CharacterOption = Annotated[
    str | None, typer.Option("--character", "-c", help="Only this character's chats.")
]


async def _character_id(tk: Tavern, character: str | None) -> str | None:
    if character is None:
        return None
    return (await tk.store.get_record("character", character, owner=tk.owner)).info.id


def _confirm(question: str, yes: bool) -> None:
    if not yes and not typer.confirm(question, default=False):
        raise fail("nothing was deleted")


# -- personas ---------------------------------------------------------------------------------


@persona_app.command("add")
def persona_add(
    name: Annotated[str, typer.Argument(help="The persona's name ({{user}} in prompts).")],
    description: Annotated[
        str, typer.Option("--description", "-d", help="Who they are ({{persona}}).")
    ] = "",
    default: Annotated[bool, typer.Option("--default", help="Make it the default.")] = False,
    home: HomeOption = None,
) -> None:
    """Create a persona."""

    async def action(tk: Tavern) -> str:
        personas = Personas(tk.store, owner=tk.owner)
        persona_id = await personas.create(name, description)
        if default:
            await personas.set_default(persona_id)
        return persona_id

    persona_id = run_in_tavern(home, action)
    mark = " (default)" if default else ""
    out.print(f"added persona [bold]{escape(name)}[/]{mark} [dim]{persona_id}[/]")


@persona_app.command("list")
def persona_list(home: HomeOption = None) -> None:
    """The personas; ``*`` marks the default."""

    async def action(tk: Tavern) -> tuple[list[Any], str | None, str]:
        selections = (await tk.settings()).selections
        infos = await Personas(tk.store, owner=tk.owner).list()
        return infos, selections.persona, selections.user_name

    infos, default, user_name = run_in_tavern(home, action)
    for info in infos:
        mark = " *" if default in (info.id, info.name) else ""
        out.print(f"[bold]{escape(info.name)}[/]{mark} [dim]{info.id}[/]")
    if not infos:
        out.print(f"[dim]no personas; you are {escape(user_name)}[/]")


@persona_app.command("default")
def persona_default(
    name: Annotated[str | None, typer.Argument(help="Persona name or id.")] = None,
    none: Annotated[bool, typer.Option("--none", help="No default persona.")] = False,
    home: HomeOption = None,
) -> None:
    """Set the persona of every chat that has none of its own."""
    if (name is None) == (not none):
        raise fail("give a persona name, or --none")

    async def action(tk: Tavern) -> Any:
        return await Personas(tk.store, owner=tk.owner).set_default(name)

    persona = run_in_tavern(home, action)
    if persona is None:
        out.print("no default persona")
    else:
        out.print(f"default persona: [bold]{escape(persona.name)}[/]")


@persona_app.command("name")
def persona_name(
    name: Annotated[str, typer.Argument(help="Your name when no persona is active.")],
    home: HomeOption = None,
) -> None:
    """Set your name ({{user}}) for chats without a persona."""
    run_in_tavern(home, lambda tk: Personas(tk.store, owner=tk.owner).set_user_name(name))
    out.print(f"your name: [bold]{escape(name.strip())}[/]")


# -- chats ------------------------------------------------------------------------------------


@chats_app.command("list")
def chats_list(
    character: CharacterOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
    home: HomeOption = None,
) -> None:
    """Chats, the most recently updated first."""

    async def action(tk: Tavern) -> list[Any]:
        char_id = await _character_id(tk, character)
        return await tk.store.list_chats(owner=tk.owner, character=char_id)

    for info in run_in_tavern(home, action):
        if as_json:
            out.print(json.dumps(chat_row(info), ensure_ascii=False), markup=False)
            continue
        out.print(
            f"[bold]{escape(info.name)}[/] [dim]{escape(info.character_name or '-')}, "
            f"{info.message_count} messages, {info.updated:%Y-%m-%d %H:%M}, {info.id}[/]"
        )


@chats_app.command("rename")
def chats_rename(
    chat: Annotated[str, typer.Argument(help="Chat id or name.")],
    name: Annotated[str, typer.Argument(help="The new name.")],
    home: HomeOption = None,
) -> None:
    """Rename a chat."""
    if not name.strip():
        raise fail("the new name cannot be blank")

    async def action(tk: Tavern) -> str:
        info = await tk.store.get_chat_info(chat, owner=tk.owner)
        await tk.store.rename_chat(info.id, name.strip(), owner=tk.owner)
        return info.name

    old = run_in_tavern(home, action)
    out.print(f"renamed chat [bold]{escape(old)}[/] to [bold]{escape(name.strip())}[/]")


@chats_app.command("delete")
def chats_delete(
    chat: Annotated[str, typer.Argument(help="Chat id or name.")],
    yes: YesOption = False,
    home: HomeOption = None,
) -> None:
    """Delete a chat and its messages (asks first)."""

    async def lookup(tk: Tavern) -> Any:
        return await tk.store.get_chat_info(chat, owner=tk.owner)

    info = run_in_tavern(home, lookup)
    _confirm(f"delete chat {info.name!r} ({info.message_count} messages)?", yes)
    run_in_tavern(home, lambda tk: tk.store.delete_chat(info.id, owner=tk.owner))
    out.print(f"deleted chat [bold]{escape(info.name)}[/]")


@chats_app.command("search")
def chats_search(
    text: Annotated[str, typer.Argument(help="Words that must all appear in one message.")],
    character: CharacterOption = None,
    home: HomeOption = None,
) -> None:
    """Find messages across chats."""

    async def action(tk: Tavern) -> list[Any]:
        char_id = await _character_id(tk, character)
        return await search_chats(tk.store, text, owner=tk.owner, character=char_id)

    hits = run_in_tavern(home, action)
    for hit in hits:
        out.print(
            f"[bold]{escape(hit.chat.name)}[/] [dim]#{hit.position} {escape(hit.name)}:[/] "
            f"{escape(hit.snippet)}"
        )
    if not hits:
        out.print(f"[dim]no message contains {escape(text)!r}[/]")


# -- characters -------------------------------------------------------------------------------


@character_app.command("rename")
def character_rename(
    name: Annotated[str, typer.Argument(help="Character name or id.")],
    new_name: Annotated[str, typer.Argument(help="The new name.")],
    home: HomeOption = None,
) -> None:
    """Rename a character; its chats stay attached."""
    info = run_in_tavern(home, lambda tk: tk.library.rename_character(name, new_name))
    out.print(f"renamed character to [bold]{escape(info.name)}[/]")


@character_app.command("duplicate")
def character_duplicate(
    name: Annotated[str, typer.Argument(help="Character name or id.")],
    new_name: Annotated[
        str | None, typer.Option("--name", help="The copy's name (default: '<name> (copy)').")
    ] = None,
    home: HomeOption = None,
) -> None:
    """Copy a character (card, avatar, lorebooks; not its chats)."""
    info = run_in_tavern(home, lambda tk: tk.library.duplicate_character(name, new_name))
    out.print(f"duplicated as [bold]{escape(info.name)}[/] [dim]{info.id}[/]")


@character_app.command("delete")
def character_delete(
    name: Annotated[str, typer.Argument(help="Character name or id.")],
    chats: Annotated[bool, typer.Option("--chats", help="Delete its chats too.")] = False,
    yes: YesOption = False,
    home: HomeOption = None,
) -> None:
    """Delete a character (asks first); its chats stay unless ``--chats``."""

    async def lookup(tk: Tavern) -> tuple[str, int]:
        info = (await tk.store.get_record("character", name, owner=tk.owner)).info
        return info.name, len(await tk.store.list_chats(owner=tk.owner, character=info.id))

    found, count = run_in_tavern(home, lookup)
    what = f" and its {count} chats" if chats and count else ""
    _confirm(f"delete character {found!r}{what}?", yes)
    deleted = run_in_tavern(home, lambda tk: tk.library.delete_character(name, with_chats=chats))
    kept = f"; its {count} chats are kept" if count and not chats else ""
    gone = f" and {deleted} chats" if deleted else ""
    out.print(f"deleted character [bold]{escape(found)}[/]{gone}{kept}")


@character_app.command("lorebook")
def character_lorebook(
    name: Annotated[str, typer.Argument(help="Character name or id.")],
    book: Annotated[str, typer.Argument(help="Lorebook name or id.")],
    remove: Annotated[bool, typer.Option("--remove", help="Detach it instead.")] = False,
    home: HomeOption = None,
) -> None:
    """Attach a lorebook to a character (scanned in all its chats), or ``--remove`` it."""

    async def action(tk: Tavern) -> str:
        char_id = (await tk.store.get_record("character", name, owner=tk.owner)).info.id
        verb = detach_character_lorebook if remove else attach_character_lorebook
        return (await verb(tk.store, char_id, book, owner=tk.owner)).name

    found = run_in_tavern(home, action)
    out.print(f"{'detached' if remove else 'attached'} lorebook [bold]{escape(found)}[/]")
