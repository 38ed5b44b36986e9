"""The messages a prompt sees (:func:`core_chat`): the chat's visible messages with their chat
index, oldest first, read lazily over a message window; shared by both prompt builders and the
regex scripts' depth."""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from typing import overload

from tavernkit.models.chat import Message
from tavernkit.models.chat_window import OutsideWindow, visible_indices

__all__ = ["CoreChat", "core_chat"]


class CoreChat(Sequence[tuple[int, Message]]):
    """The messages a prompt sees as ``(chat index, message)`` pairs, oldest first.

    Only the indices are stored; a pair is made when read, since a build of a long chat reads
    only the newest few (the history walk stops at the budget). Over a
    :class:`~tavernkit.models.chat_window.MessageWindow` the positions of the visible messages
    the turn did not load are counted, not known: reading one raises
    :class:`~tavernkit.models.chat_window.OutsideWindow`.
    """

    __slots__ = ("_head", "_indices", "_messages", "_skipped")

    def __init__(
        self,
        messages: Sequence[Message],
        indices: list[int],
        *,
        head: list[int] | None = None,
        skipped: int = 0,
    ) -> None:
        self._messages = messages
        self._indices = indices
        self._head = head or []
        self._skipped = skipped

    def __len__(self) -> int:
        return len(self._head) + self._skipped + len(self._indices)

    def _index(self, position: int) -> int:
        if not self._skipped and not self._head:
            return self._indices[position]
        n = len(self)
        p = position + n if position < 0 else position
        if not 0 <= p < n:
            raise IndexError("chat position out of range")
        if p < len(self._head):
            return self._head[p]
        p -= len(self._head) + self._skipped
        if p < 0:
            raise OutsideWindow(self._indices[0] - 1 if self._indices else len(self._messages) - 1)
        return self._indices[p]

    @overload
    def __getitem__(self, index: int) -> tuple[int, Message]: ...

    @overload
    def __getitem__(self, index: slice) -> list[tuple[int, Message]]: ...

    def __getitem__(self, index: int | slice) -> tuple[int, Message] | list[tuple[int, Message]]:
        messages = self._messages
        if isinstance(index, slice):
            return [self[p] for p in range(*index.indices(len(self)))]
        i = self._index(index)
        return i, messages[i]

    def position_of(self, index: int) -> int:
        """The position (oldest first) of the message at chat ``index``, which must be one of
        this view's messages."""
        head = self._head
        if head and index <= head[-1]:
            return bisect.bisect_left(head, index)
        return len(head) + self._skipped + bisect.bisect_left(self._indices, index)

    def __iter__(self) -> Iterator[tuple[int, Message]]:
        messages = self._messages
        for i in self._head:
            yield i, messages[i]
        if self._skipped:
            raise OutsideWindow(self._head[-1] + 1 if self._head else 0)
        for i in self._indices:
            yield i, messages[i]


def core_chat(messages: Sequence[Message], kind: str, *, tools: bool = True) -> CoreChat:
    """The messages a prompt sees, with their chat index: hidden (system) messages dropped
    unless they carry tool calls, and the last one dropped for a swipe."""
    head, tail, skipped = visible_indices(messages, tools=tools)
    if not tail and not skipped:
        indices, head = head, []
    else:
        indices = tail
    if kind == "swipe" and (indices or head or skipped):
        if not indices and skipped:
            raise OutsideWindow(len(messages) - 1)
        (indices or head).pop()
    return CoreChat(messages, indices, head=head, skipped=skipped)
