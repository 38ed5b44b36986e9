"""Personas, who the user speaks as: create one, make one the default, lock one to a chat
(SillyTavern's ``chat_metadata.persona``), and the user's name when no persona is active.

A turn's persona is, in order: the one the turn names (``overrides.persona``), the one locked
to the chat, the default (``settings.selections.persona``); the user's name is the persona's
name, else ``settings.selections.user_name``. An unknown name is a
:class:`~tavernkit.errors.NotFound` here, before anything is written.
"""

from __future__ import annotations

from tavernkit.chat.chat_metadata import chat_metadata
from tavernkit.errors import FormatError, NotFound
from tavernkit.models.persona import Persona
from tavernkit.models.settings import Settings
from tavernkit.store.protocol import RecordInfo, Store

__all__ = ["Personas"]


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

    async def for_chat(self, chat_id: str) -> Persona | None:
        """The persona a turn in the chat speaks as when it names none (locked, else default;
        a locked or default persona that was deleted since is skipped)."""
        window = await self.store.load_chat_window(chat_id, last=1, owner=self.owner)
        locked = (window.header.get("chat_metadata") or {}).get("persona")
        for ref in (locked, (await self._settings()).selections.persona):
            if isinstance(ref, str) and ref:
                try:
                    return (await self.get(ref))[1]
                except NotFound:
                    continue
        return None
