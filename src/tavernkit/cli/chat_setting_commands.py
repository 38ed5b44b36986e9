"""The ``tavernkit chat`` slash commands that read or change a chat's setup rather than take a
turn (:class:`SettingCommands`, a base of :class:`~tavernkit.cli.chat_session.Session`):
``/persona``, ``/note``, ``/book``, ``/rename``, ``/chats``, ``/prompt``, ``/lore``, ``/vars``."""

from __future__ import annotations

import json
from typing import Any

from rich.markup import escape

from tavernkit.chat.authors_note import NOTE_ROLES, authors_note, set_authors_note
from tavernkit.chat.inspect import inspection
from tavernkit.chat.lorebooks import set_chat_lorebook
from tavernkit.chat.personas import Personas
from tavernkit.chat.service import ChatService
from tavernkit.cli.chat_display import out, print_inspection
from tavernkit.cli.slash import COMMANDS, no_argument, positive_number
from tavernkit.facade import Tavern

__all__ = ["SettingCommands"]

_ROLE_NAMES = {number: name for name, number in NOTE_ROLES.items()}


class SettingCommands:
    """The setup commands of one session; the session holds the Tavern and the chat."""

    tk: Tavern
    chats: ChatService
    chat_id: str
    overrides: dict[str, Any]

    async def cmd_persona(self, arg: str) -> None:
        personas = Personas(self.tk.store, owner=self.tk.owner)
        if not arg:
            current = await personas.for_chat(self.chat_id)
            who = (
                current.name
                if current is not None
                else (await self.tk.settings()).selections.user_name
            )
            out.print(f"[dim]you speak as[/] {escape(who)}")
            names = [info.name for info in await personas.list()]
            if names:
                out.print(f"[dim]personas: {escape(', '.join(names))}[/]")
            return
        persona = await personas.set_for_chat(self.chat_id, None if arg == "off" else arg)
        if persona is None:
            out.print("[dim]this chat uses the default persona again[/]")
        else:
            out.print(f"[dim]in this chat you speak as[/] {escape(persona.name)}")

    async def cmd_note(self, arg: str) -> None:
        command = COMMANDS["note"]
        store, owner = self.tk.store, self.tk.owner
        key, _, value = arg.partition(" ")
        value = value.strip()
        if not arg:
            note = await authors_note(store, self.chat_id, owner=owner)
        elif arg == "off":
            note = await set_authors_note(store, self.chat_id, owner=owner, text="")
        elif key in ("depth", "every"):
            if not value:
                raise command.error(f"/note {key} needs a number")
            number = positive_number(command, value, f"the {key}", zero=True)
            if key == "depth":
                note = await set_authors_note(store, self.chat_id, owner=owner, depth=number)
            else:
                note = await set_authors_note(store, self.chat_id, owner=owner, interval=number)
        elif key == "role":
            if value not in NOTE_ROLES:
                raise command.error(f"the role must be system, user or assistant, not {value!r}")
            note = await set_authors_note(store, self.chat_id, owner=owner, role=NOTE_ROLES[value])
        else:
            note = await set_authors_note(store, self.chat_id, owner=owner, text=arg)
        if not note.prompt:
            out.print("[dim]no author's note in this chat[/]")
            return
        role = _ROLE_NAMES.get(note.role, str(note.role))
        out.print(
            f"[dim]author's note (depth {note.depth}, every {note.interval}, {role}):[/] "
            f"{escape(note.prompt)}"
        )

    async def cmd_book(self, arg: str) -> None:
        store, owner = self.tk.store, self.tk.owner
        if arg:
            book = await set_chat_lorebook(
                store, self.chat_id, None if arg == "off" else arg, owner=owner
            )
            if book is None:
                out.print("[dim]this chat has no lorebook of its own now[/]")
            else:
                out.print(f"[dim]this chat's lorebook:[/] {escape(book.name)}")
            return
        stored = await self.chats.load(self.chat_id)
        current = (stored.header.get("chat_metadata") or {}).get("world_info")
        out.print(
            f"[dim]this chat's lorebook:[/] {escape(current)}"
            if current
            else "[dim]this chat has no lorebook of its own (/book NAME binds one)[/]"
        )

    async def cmd_rename(self, arg: str) -> None:
        command = COMMANDS["rename"]
        if not arg:
            raise command.error("a new name is needed")
        await self.tk.store.rename_chat(self.chat_id, arg, owner=self.tk.owner)
        out.print(f"[dim]this chat is now called {escape(arg)}[/]")

    async def cmd_chats(self, arg: str) -> None:
        no_argument(COMMANDS["chats"], arg)
        stored = await self.chats.load(self.chat_id)
        for info in await self.tk.store.list_chats(
            owner=self.tk.owner, character=stored.info.character_id
        ):
            mark = " *" if info.id == self.chat_id else ""
            out.print(
                f"[bold]{escape(info.name)}[/]{mark} [dim]{info.message_count} messages, "
                f"{info.updated:%Y-%m-%d %H:%M}[/]"
            )

    async def cmd_prompt(self, arg: str) -> None:
        no_argument(COMMANDS["prompt"], arg)
        data = inspection(await self.chats.preview(self.chat_id, overrides=self.overrides))
        print_inspection(out, data)

    async def cmd_lore(self, arg: str) -> None:
        no_argument(COMMANDS["lore"], arg)
        data = inspection(await self.chats.preview(self.chat_id, overrides=self.overrides))
        if not data["lorebook"]:
            out.print("[dim]no lorebook entry fires for the next turn[/]")
        for key, entry in data["lorebook"].items():
            label = entry["comment"] or key
            out.print(f"[bold]{escape(label)}[/] [dim]{escape(key)}: {escape(entry['why'])}[/]")

    async def cmd_vars(self, arg: str) -> None:
        no_argument(COMMANDS["vars"], arg)
        stored = await self.chats.load(self.chat_id)
        local = (stored.header.get("chat_metadata") or {}).get("variables") or {}
        glob = await self.tk.store.get_global_variables(owner=self.tk.owner)
        for scope, values in (("local", local), ("global", glob)):
            for key, value in values.items():
                out.print(f"[dim]{scope}[/] {escape(key)} = {escape(json.dumps(value))}")
        if not local and not glob:
            out.print("[dim]no variables[/]")
