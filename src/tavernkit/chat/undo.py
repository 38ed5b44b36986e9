"""Undo for destructive chat edits: a snapshot of a chat's messages taken before the edit, and
the writes that put them back.

A front end takes a :class:`ChatSnapshot` before a command that deletes or overwrites text
(an edit, a delete, a regenerate) and keeps the last few; undo restores the newest. Restoring
writes only the messages between the first and the last that differ, each in place (an update,
a middle delete, an insert that moves the later messages down), so undoing an edit of the last
reply in a long chat is one message write, and a chat's other branches, which continue its
later messages, stay (rewriting from the first difference would cut them off).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
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
    #: where each branch of the chat's tree started (so a message put back rejoins the
    #: branches that continued it)
    forks: Mapping[str, int] = field(default_factory=dict)


async def take_snapshot(store: Store, chat_id: str, label: str, *, owner: str) -> ChatSnapshot:
    stored = await store.load_chat(chat_id, owner=owner)
    tree = await store.chat_tree(stored.info.id, owner=owner)
    forks = {b.id: b.fork for b in tree.branches}
    return ChatSnapshot(stored.info.id, label, tuple(m.data for m in stored.messages), forks)


async def restore_snapshot(store: Store, snapshot: ChatSnapshot, *, owner: str) -> int:
    """Put the chat's messages back as they were; returns how many messages were written."""
    stored = await store.load_chat(snapshot.chat_id, owner=owner)
    current = [m.data for m in stored.messages]
    wanted = list(snapshot.messages)
    same = _common_prefix(current, wanted)
    tail = _common_prefix(current[same:][::-1], wanted[same:][::-1])
    now, then = current[same : len(current) - tail], wanted[same : len(wanted) - tail]
    shared = min(len(now), len(then))
    written = 0
    for i in range(shared):
        if now[i] != then[i]:
            await store.update_message(stored.messages[same + i].id, then[i], owner=owner)
            written += 1
    if len(now) > shared:
        await store.remove_messages(snapshot.chat_id, same + shared, len(now) - shared, owner=owner)
    for i, data in enumerate(then[shared:]):
        position = same + shared + i
        join = await _rejoins(store, snapshot, position, owner=owner)
        await store.insert_message(snapshot.chat_id, position, data, join=join, owner=owner)
        written += 1
    return written


def _common_prefix(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


async def _rejoins(store: Store, snapshot: ChatSnapshot, position: int, *, owner: str) -> bool:
    """Whether a message put back at ``position`` goes before the branch point there: a
    branch starts at ``position`` now that started later when the snapshot was taken (the
    deletion moved it up onto the message before)."""
    if not snapshot.forks:
        return False
    tree = await store.chat_tree(snapshot.chat_id, owner=owner)
    return any(
        b.fork == position and snapshot.forks.get(b.id, -1) > position for b in tree.branches
    )


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
