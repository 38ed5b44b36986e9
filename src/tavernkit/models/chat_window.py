"""A chat's messages as a turn loads them: the newest ones and the first, not the middle.

A prompt can use only the messages that fit its budget, the world-info scan reads at most its
depth, and the macros read counts and the last few messages; so a turn loads the chat's tail
(plus the oldest messages up to the first visible one, which the scan evaluates) and counts the
rest in the store. :class:`MessageWindow` is that load as the ``Sequence[Message]`` the builders
read: its length is the whole chat's, the loaded messages sit at their real indexes, and
reading one that was not loaded raises :class:`OutsideWindow`, so a build can never be silently
different from a build over the whole chat: the loader catches it and loads more.

The few whole-chat questions the builders ask (how many user messages, how many visible) are
answered by :func:`count_user` and :func:`count_visible` from the loaded messages plus the
store's counts of the others.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

from tavernkit.errors import OutsideWindow as OutsideWindow
from tavernkit.models.chat import Message

__all__ = [
    "MessageCounts",
    "MessageWindow",
    "OutsideWindow",
    "count_user",
    "count_visible",
    "visible_indices",
]


@dataclass(frozen=True, slots=True)
class MessageCounts:
    """Messages counted by what the builders ask of the ones they do not read: how many, how
    many hidden (``is_system``), sent by the user, and hidden but carrying tool calls."""

    total: int = 0
    hidden: int = 0
    user: int = 0
    hidden_tools: int = 0

    def minus(self, other: MessageCounts) -> MessageCounts:
        return MessageCounts(
            self.total - other.total,
            self.hidden - other.hidden,
            self.user - other.user,
            self.hidden_tools - other.hidden_tools,
        )


class MessageWindow(Sequence[Message]):
    """``head`` (indexes ``0..len(head)-1``), then ``gap.total`` messages not loaded, then
    ``tail`` (the newest). See the module docstring."""

    __slots__ = ("_head", "_tail", "_tail_start", "gap")

    def __init__(
        self, head: Sequence[Message], tail: Sequence[Message], gap: MessageCounts
    ) -> None:
        self._head = list(head)
        self._tail = list(tail)
        self.gap = gap
        self._tail_start = len(self._head) + gap.total

    @property
    def complete(self) -> bool:
        """Whether every message is loaded (the window is then just the chat)."""
        return self.gap.total == 0

    @property
    def tail_start(self) -> int:
        """The index of the oldest message of the tail."""
        return self._tail_start

    @property
    def head(self) -> list[Message]:
        return self._head

    @property
    def tail(self) -> list[Message]:
        return self._tail

    def with_message(self, message: Message) -> MessageWindow:
        """The window of the chat with ``message`` appended (the newest, in the tail)."""
        return MessageWindow(self._head, [*self._tail, message], self.gap)

    def without_last(self) -> MessageWindow:
        """The window of the chat minus its newest message (a swipe's or regeneration's view)."""
        if not self._tail:
            raise OutsideWindow(self._tail_start - 1)
        return MessageWindow(self._head, self._tail[:-1], self.gap)

    def __len__(self) -> int:
        return self._tail_start + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError("message index out of range")
        if i >= self._tail_start:
            return self._tail[i - self._tail_start]
        if i < len(self._head):
            return self._head[i]
        raise OutsideWindow(i)

    def __iter__(self) -> Iterator[Message]:
        yield from self._head
        if self.gap.total:
            raise OutsideWindow(len(self._head))
        yield from self._tail

    def __reversed__(self) -> Iterator[Message]:
        yield from reversed(self._tail)
        if self.gap.total:
            raise OutsideWindow(self._tail_start - 1)
        yield from reversed(self._head)

    def __repr__(self) -> str:
        return (
            f"MessageWindow(head={len(self._head)}, gap={self.gap.total}, tail={len(self._tail)})"
        )


def _visible(message: Message, tools: bool) -> bool:
    return not message.is_system or bool(tools and message.extra.tool_invocations)


def visible_indices(
    messages: Sequence[Message], *, tools: bool
) -> tuple[list[int], list[int], int]:
    """The chat indexes of the visible messages (not hidden, or hidden with tool calls when
    ``tools``): those of the head, those of the tail, and how many visible ones lie between.
    A plain sequence is all head."""
    if isinstance(messages, MessageWindow) and not messages.complete:
        start = messages.tail_start
        head = [i for i, m in enumerate(messages.head) if _visible(m, tools)]
        tail = [start + i for i, m in enumerate(messages.tail) if _visible(m, tools)]
        gap = messages.gap
        skipped = gap.total - gap.hidden + (gap.hidden_tools if tools else 0)
        return head, tail, skipped
    return [i for i, m in enumerate(messages) if _visible(m, tools)], [], 0


def count_visible(messages: Sequence[Message], *, tools: bool = False) -> int:
    """How many messages are visible (see :func:`visible_indices`)."""
    head, tail, skipped = visible_indices(messages, tools=tools)
    return len(head) + len(tail) + skipped


def count_user(messages: Sequence[Message]) -> int:
    """How many messages the user sent."""
    if isinstance(messages, MessageWindow) and not messages.complete:
        loaded = sum(1 for m in messages.head if m.is_user) + sum(
            1 for m in messages.tail if m.is_user
        )
        return loaded + messages.gap.user
    return sum(1 for m in messages if m.is_user)
