"""Lorebooks bound to one chat or one character, on top of the global ones.

A chat's book is SillyTavern's "chat lore" (``chat_metadata.world_info``, one book); a
character's books are the store's ``character -> lorebook`` links (its embedded book is linked
on import, more can be added, as SillyTavern's "additional lorebooks"). The turn's world-info
scan reads both (:func:`~tavernkit.store.chat_state.load_chat_state`). A book that does not
exist is a :class:`~tavernkit.errors.NotFound` before anything is written.
"""

from __future__ import annotations

from tavernkit.chat.chat_metadata import chat_metadata
from tavernkit.store.protocol import Store
from tavernkit.store.record_types import RecordInfo

__all__ = [
    "attach_character_lorebook",
    "character_lorebooks",
    "detach_character_lorebook",
    "set_chat_lorebook",
]


async def set_chat_lorebook(
    store: Store, chat_id: str, book: str | None, *, owner: str
) -> RecordInfo | None:
    """Bind ``book`` (name or id) to the chat; ``None`` unbinds it. Returns the book."""
    info = (await store.get_record("lorebook", book, owner=owner)).info if book else None
    found, metadata = await chat_metadata(store, chat_id, owner=owner)
    metadata.world_info = info.name if info is not None else None
    await store.update_chat_metadata(found, metadata.to_wire(), owner=owner)
    return info


async def character_lorebooks(store: Store, character: str, *, owner: str) -> list[RecordInfo]:
    return await store.links("character", character, "lorebook", owner=owner)


async def attach_character_lorebook(
    store: Store, character: str, book: str, *, owner: str
) -> RecordInfo:
    """Add ``book`` to the character's books (once: attaching it again changes nothing)."""
    info = (await store.get_record("lorebook", book, owner=owner)).info
    linked = await character_lorebooks(store, character, owner=owner)
    if all(b.id != info.id for b in linked):
        await store.link("character", character, "lorebook", "lorebook", info.id, owner=owner)
    return info


async def detach_character_lorebook(
    store: Store, character: str, book: str, *, owner: str
) -> RecordInfo:
    info = (await store.get_record("lorebook", book, owner=owner)).info
    await store.unlink("character", character, "lorebook", "lorebook", info.id, owner=owner)
    return info
