"""Search across chats: every message whose shown text contains the words asked for.

A case-insensitive substring match per word (all words must appear in one message), as
SillyTavern's chat search does; ``character`` narrows it to one character's chats. Chats are
read one at a time, so memory stays one chat's worth whatever the library holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from tavernkit.store.chat_types import ChatInfo
from tavernkit.store.protocol import Store

__all__ = ["ChatHit", "search_chats"]


@dataclass(frozen=True, slots=True)
class ChatHit:
    chat: ChatInfo
    position: int
    name: str
    snippet: str


def _snippet(text: str, word: str, width: int = 80) -> str:
    at = max(text.lower().find(word), 0)
    start = max(at - width // 3, 0)
    piece = " ".join(text[start : start + width].split())
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")


async def search_chats(
    store: Store, query: str, *, owner: str, character: str | None = None, limit: int = 50
) -> list[ChatHit]:
    """Up to ``limit`` messages matching ``query``, the most recently updated chats first."""
    words = [w.lower() for w in query.split()]
    if not words:
        return []
    hits: list[ChatHit] = []
    for info in await store.list_chats(owner=owner, character=character):
        stored = await store.load_chat(info.id, owner=owner)
        for entry in stored.messages:
            text = entry.data.get("mes")
            if not isinstance(text, str):
                continue
            lowered = text.lower()
            if all(w in lowered for w in words):
                name = str(entry.data.get("name") or "")
                hits.append(ChatHit(info, entry.position, name, _snippet(text, words[0])))
                if len(hits) >= limit:
                    return hits
    return hits
