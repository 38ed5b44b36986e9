"""Personas, who the user speaks as: create one, make one the default, lock one to a chat
(SillyTavern's ``chat_metadata.persona``) or to a character (SillyTavern's persona
connection: ``settings.selections.character_personas``), and the user's name when no persona
is active.

A turn's persona is, in order: the one the turn names (``overrides.persona``), the one locked
to the chat, the one locked to the chat's character, the default
(``settings.selections.persona``); a locked or default persona deleted since is skipped. The
user's name is the persona's name, else ``settings.selections.user_name``. An unknown name is
a :class:`~tavernkit.errors.NotFound` here, before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tavernkit.chat.chat_metadata import chat_metadata
from tavernkit.errors import FormatError, NotFound
from tavernkit.models.persona import Persona
from tavernkit.models.settings import Settings
from tavernkit.store.chat_state import persona_candidates
from tavernkit.store.protocol import Store
from tavernkit.store.record_types import RecordInfo

__all__ = ["PersonaLocks", "Personas"]


@dataclass(frozen=True, slots=True)
class PersonaLocks:
    """Who a chat speaks as when a turn names no persona, and why: the persona ids locked to
    the chat and to its character, and the default (each ``None`` when unset or deleted
    since); ``active`` is the first of them, ``source`` which one it is."""

    chat: str | None
    character: str | None
    default: str | None

    @property
    def source(self) -> Literal["chat", "character", "default"] | None:
        if self.chat is not None:
            return "chat"
        if self.character is not None:
            return "character"
        return "default" if self.default is not None else None

    @property
    def active(self) -> str | None:
        return self.chat or self.character or self.default


class Personas:
    """The persona calls of one owner's store."""

    def __init__(self, store: Store, *, owner: str) -> None:
        self.store = store
        self.owner = owner

    async def _settings(self) -> Settings:
        stored = await self.store.get_settings(owner=self.owner)
        return stored if isinstance(stored, Settings) else Settings()

    async def list(self) -> list[RecordInfo]:
        return await self.store.list("persona", owner=self.owner)

    async def get(self, ref: str) -> tuple[str, Persona]:
        """The persona with id or name ``ref``: ``(record id, persona)``."""
        try:
            stored = await self.store.get_record("persona", ref, owner=self.owner)
        except NotFound:
            raise NotFound(
                f"no persona named {ref!r} (tavernkit persona list shows them)"
            ) from None
        return stored.info.id, Persona.model_validate(stored.data)

    async def create(self, name: str, description: str = "") -> str:
        """A new persona; returns its id. Names may repeat (as in SillyTavern), but a blank
        name cannot be used."""
        if not name.strip():
            raise FormatError("a persona needs a name", field="name")
        ref = await self.store.put(
            "persona", Persona(name=name.strip(), description=description), owner=self.owner
        )
        return ref.id

    async def set_default(self, ref: str | None) -> Persona | None:
        """Make ``ref`` the persona of every chat without one of its own (``None``: none)."""
        found = await self.get(ref) if ref is not None else None
        settings = await self._settings()
        settings.selections.persona = found[0] if found is not None else None
        await self.store.put_settings(settings, owner=self.owner)
        return found[1] if found is not None else None

    async def set_user_name(self, name: str) -> None:
        """The name ``{{user}}`` stands for when no persona is active."""
        if not name.strip():
            raise FormatError("the user's name cannot be blank", field="user_name")
        settings = await self._settings()
        settings.selections.user_name = name.strip()
        await self.store.put_settings(settings, owner=self.owner)

    async def set_for_chat(self, chat_id: str, ref: str | None) -> Persona | None:
        """Lock ``ref`` to the chat (``None`` unlocks it: the default applies again)."""
        found = await self.get(ref) if ref is not None else None
        chat, metadata = await chat_metadata(self.store, chat_id, owner=self.owner)
        metadata.persona = found[0] if found is not None else None
        await self.store.update_chat_metadata(chat, metadata.to_wire(), owner=self.owner)
        return found[1] if found is not None else None

    async def set_for_character(self, character: str, ref: str | None) -> Persona | None:
        """Lock ``ref`` to the character with id or name ``character``: its chats speak as it
        unless a chat has a persona of its own (``None`` unlocks it)."""
        character_id = (
            await self.store.get_record("character", character, owner=self.owner)
        ).info.id
        found = await self.get(ref) if ref is not None else None
        settings = await self._settings()
        locks = settings.selections.character_personas
        if found is None:
            locks.pop(character_id, None)
        else:
            locks[character_id] = found[0]
        await self.store.put_settings(settings, owner=self.owner)
        return found[1] if found is not None else None

    async def locks(self, chat_id: str) -> PersonaLocks:
        """The chat's lock, its character's and the default (deleted ones left out)."""
        window = await self.store.load_chat_window(chat_id, last=1, owner=self.owner)
        settings = await self._settings()
        sel = settings.selections
        character = window.info.character_id
        refs = {
            "chat": (window.header.get("chat_metadata") or {}).get("persona"),
            "character": sel.character_personas.get(character) if character else None,
            "default": sel.persona,
        }
        ids: dict[str, str | None] = {}
        for name, ref in refs.items():
            ids[name] = None
            if isinstance(ref, str) and ref:
                try:
                    ids[name] = (await self.get(ref))[0]
                except NotFound:
                    continue
        return PersonaLocks(chat=ids["chat"], character=ids["character"], default=ids["default"])

    async def for_chat(self, chat_id: str) -> Persona | None:
        """The persona a turn in the chat speaks as when it names none (locked to the chat,
        else to its character, else the default; one deleted since is skipped)."""
        window = await self.store.load_chat_window(chat_id, last=1, owner=self.owner)
        locked = (window.header.get("chat_metadata") or {}).get("persona")
        settings = await self._settings()
        character = window.info.character_id
        refs = persona_candidates(
            None, locked if isinstance(locked, str) else None, character, settings
        )
        for ref in refs:
            try:
                return (await self.get(ref))[1]
            except NotFound:
                continue
        return None
