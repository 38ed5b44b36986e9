"""Revisions: what a client that read a message or record sends back with its change, so a
change made from a stale copy (another tab or device wrote since) is refused instead of
silently overwriting the newer content.

A revision is a digest of everything stored about the thing (a message's id, SillyTavern JSON
with swipes and unfinished swipes; a record's id, name and JSON; a lorebook entry's JSON), so
every write that changes it — an edit, a swipe, a streamed reply, a hide, a save — gives it a
new one without a counter every write path must remember to bump, and a different message now
at the same index never shares it. (The store's integer ``records.revision`` stays what its
caches compare.)"""

from __future__ import annotations

import asyncio
import hashlib
import json
import weakref
from collections.abc import Hashable
from typing import Any

from tavernkit.errors import StaleRevision
from tavernkit.store.chat_types import StoredMessage

__all__ = [
    "check_message_revision",
    "check_revision",
    "content_revision",
    "edit_lock",
    "message_revision",
    "revision_lock",
]


def content_revision(*parts: Any) -> str:
    """The revision of JSON-able ``parts``: 16 hex digits that change when any of them does."""
    content = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:16]


def message_revision(message: StoredMessage) -> str:
    """The message's revision: it changes whenever anything stored about it changes."""
    return content_revision(message.id, message.data, list(message.partial_swipes))


def check_revision(
    expected: str | None, current: str, what: str, now: dict[str, object] | None = None
) -> None:
    """Raise :class:`StaleRevision` when ``expected`` is given and is not ``current``
    (``None``: the caller sent none, and the change is made as before). ``what`` names the
    thing in the message; ``now`` is what it holds now, for the error's ``current``."""
    if expected is None or expected == current:
        return
    raise StaleRevision(
        f"{what} was changed elsewhere since it was read (revision {expected!r}, now "
        f"{current!r}); reload it before changing it",
        revision=current,
        current=now,
    )


def check_message_revision(message: StoredMessage, expected: str | None) -> None:
    """:func:`check_revision` for a message, with its current text in the error."""
    now: dict[str, object] = {"text": str(message.data.get("mes", ""))}
    check_revision(expected, message_revision(message), f"message {message.position}", now)


#: one lock per key while someone holds or waits for it (weak: no growth)
_LOCKS: weakref.WeakValueDictionary[Hashable, asyncio.Lock] = weakref.WeakValueDictionary()


def revision_lock(*key: Hashable) -> asyncio.Lock:
    """The lock that makes the revision-checked changes of one thing (``key``: owner, kind,
    id...) run one at a time in this process, check and write together. Servers sharing one
    database from several processes still check, but two changes arriving in the same
    instant there may both pass."""
    lock = _LOCKS.get(key)
    if lock is None:
        lock = asyncio.Lock()
        _LOCKS[key] = lock
    return lock


def edit_lock(owner: str, chat_id: str) -> asyncio.Lock:
    """:func:`revision_lock` of a chat's message edits."""
    return revision_lock("chat", owner, chat_id)
