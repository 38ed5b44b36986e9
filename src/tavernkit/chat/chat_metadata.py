"""A chat's ``chat_metadata`` without its messages: what the settings of one chat (its
Author's Note, locked persona, chat lorebook, review setting) read before they change one
field. A settings screen of a 20,000-message chat costs one header row and one message, not
the whole chat (the store's window read, newest message only)."""

from __future__ import annotations

from tavernkit.models.chat import ChatMetadata
from tavernkit.store.protocol import Store

__all__ = ["chat_metadata"]


async def chat_metadata(store: Store, chat_ref: str, *, owner: str) -> tuple[str, ChatMetadata]:
    """The chat's id and its ``chat_metadata`` (``NotFound`` for an unknown chat)."""
    window = await store.load_chat_window(chat_ref, last=1, owner=owner)
    return window.info.id, ChatMetadata.model_validate(window.header.get("chat_metadata") or {})
