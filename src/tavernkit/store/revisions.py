"""A message's revision: what a client that read the message sends back with its change, so a
change made from a stale copy (another tab or device wrote since) is refused instead of
silently overwriting the newer text.

A message's revision is a digest of everything stored about it (its id, its SillyTavern JSON
with swipes, its unfinished swipes), so every write that changes the message — an edit, a
swipe, a streamed reply, a hide — gives it a new one without a counter every write path must
remember to bump, and a different message now at the same index never shares it. Records
(characters, lorebooks...) keep the integer revision the store bumps on each write."""

from __future__ import annotations

import asyncio
import hashlib
import json
import weakref

from tavernkit.errors import StaleRevision
from tavernkit.store.protocol import StoredMessage

__all__ = ["check_message_revision", "edit_lock", "message_revision"]


def message_revision(message: StoredMessage) -> str:
    """The message's revision: 16 hex digits that change whenever anything stored changes."""
    content = json.dumps(
        [message.id, message.data, list(message.partial_swipes)],
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:16]


def check_message_revision(message: StoredMessage, expected: str | None) -> None:
    """Raise :class:`StaleRevision` when ``expected`` is given and is not the message's
    current revision (``None``: the caller sent none, and the change is made as before)."""
    if expected is None:
        return
    current = message_revision(message)
    if expected != current:
        raise StaleRevision(
            f"message {message.position} was changed elsewhere since it was read "
            f"(revision {expected!r}, now {current!r}); reload it before editing",
            revision=current,
            current={"text": str(message.data.get("mes", ""))},
        )


#: one lock per (owner, chat) while someone holds or waits for it (weak: no growth)
_LOCKS: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = weakref.WeakValueDictionary()


def edit_lock(owner: str, chat_id: str) -> asyncio.Lock:
    """The lock that makes a chat's revision-checked edits run one at a time in this process
    (check and write together). Servers sharing one database in several processes still
    check, but two edits arriving in the same instant there may both pass."""
    key = (owner, chat_id)
    lock = _LOCKS.get(key)
    if lock is None:
        lock = asyncio.Lock()
        _LOCKS[key] = lock
    return lock
