"""A chat's whole tree as one JSON document (tavernkit's own format; the current path alone
is SillyTavern's ``.jsonl``, the chat export).

``{"format": "tavernkit-chat-tree", "version": 1, "name", "header", "current", "branches"}``:
``header`` is the chat's header line as SillyTavern writes it; each branch is ``{"id",
"parent", "fork", "messages"}`` with its own messages (SillyTavern's JSON), the first at
position ``fork``; a branch's path is its parent's path up to ``fork`` then its messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tavernkit.store.chat_tree import BranchRow, chain, owner_at
from tavernkit.store.chat_types import ChatTree, StoredChat, StoredMessage

__all__ = ["TREE_FORMAT", "tree_document"]

TREE_FORMAT = "tavernkit-chat-tree"


def tree_document(
    chat: StoredChat, tree: ChatTree, parked: Mapping[str, Sequence[StoredMessage]]
) -> dict[str, Any]:
    """The document of ``chat`` (its current path), its ``tree`` and its ``parked`` messages
    (read in one state of the chat)."""
    rows = {b.id: BranchRow(b.id, b.parent, b.fork) for b in tree.branches}
    here = chain(rows, tree.current)
    own: dict[str, list[StoredMessage]] = {b.id: [] for b in tree.branches}
    for message in chat.messages:
        own[owner_at(here, message.position).id].append(message)
    for branch, messages in parked.items():
        own.setdefault(branch, []).extend(messages)
    return {
        "format": TREE_FORMAT,
        "version": 1,
        "name": chat.info.name,
        "header": chat.header,
        "current": tree.current,
        "branches": [
            {
                "id": b.id,
                "parent": b.parent,
                "fork": b.fork,
                "messages": [m.data for m in sorted(own[b.id], key=lambda m: m.position)],
            }
            for b in tree.branches
        ],
    }
