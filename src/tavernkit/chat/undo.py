"""Undo for destructive chat edits: a snapshot of a chat's messages taken before the edit, and
the writes that put them back.

A front end takes a :class:`ChatSnapshot` before a command that deletes or overwrites text
(an edit, a delete, a regenerate) and keeps the last few; undo restores the newest. Restoring
rewrites only from the first message that differs, so undoing an edit of the last reply in a
long chat is one message write, not the whole chat.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from tavernkit.errors import NotFound
from tavernkit.store.protocol import Store

__all__ = ["ChatSnapshot", "UndoStack", "restore_snapshot", "take_snapshot"]


@dataclass(frozen=True)
class ChatSnapshot:
    """A chat's messages (their stored data, swipes included) before ``label`` changed them."""

    chat_id: str
    label: str
    messages: tuple[dict[str, Any], ...]


async def take_snapshot(store: Store, chat_id: str, label: str, *, owner: str) -> ChatSnapshot:
    stored = await store.load_chat(chat_id, owner=owner)
    return ChatSnapshot(stored.info.id, label, tuple(m.data for m in stored.messages))


async def restore_snapshot(store: Store, snapshot: ChatSnapshot, *, owner: str) -> int:
    """Put the chat's messages back as they were; returns how many messages were rewritten."""
    stored = await store.load_chat(snapshot.chat_id, owner=owner)
    current = [m.data for m in stored.messages]
    wanted = snapshot.messages
    same = 0
    while same < min(len(current), len(wanted)) and current[same] == wanted[same]:
        same += 1
    # One changed message with the same count (an edit, a swipe chosen) is one update.
    if (
        len(current) == len(wanted)
        and same < len(wanted)
        and current[same + 1 :] == list(wanted[same + 1 :])
    ):
        await store.update_message(stored.messages[same].id, wanted[same], owner=owner)
        return 1
    if same < len(current):
        await store.truncate_chat(snapshot.chat_id, same, owner=owner)
    for data in wanted[same:]:
        await store.append_message(snapshot.chat_id, data, owner=owner)
    return len(wanted) - same


class UndoStack:
    """The last ``limit`` snapshots of one session, newest on top."""

    def __init__(self, limit: int = 20) -> None:
        self._items: deque[ChatSnapshot] = deque(maxlen=limit)

    def __len__(self) -> int:
        return len(self._items)

    def push(self, snapshot: ChatSnapshot) -> None:
        self._items.append(snapshot)

    def discard_last(self) -> None:
        """Forget the newest snapshot (its command failed before changing anything)."""
        if self._items:
            self._items.pop()

    async def undo(self, store: Store, *, owner: str) -> ChatSnapshot:
        """Restore the newest snapshot and drop it; :class:`NotFound` when there is none."""
        if not self._items:
            raise NotFound("nothing to undo")
        snapshot = self._items.pop()
        await restore_snapshot(store, snapshot, owner=owner)
        return snapshot
