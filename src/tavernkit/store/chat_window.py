"""How much of a chat a turn loads, and the retry when a build needs more.

A turn starts from the newest :data:`FIRST_WINDOW` messages (or the size that sufficed for the
same chat last time in this process) and grows the window :data:`GROWTH` times over each time a
build reads past it, until the window holds the whole chat; so a long chat costs what its
prompt uses, and a chat whose prompt reaches far back (a huge context, a text-completion build,
a scan with no depth limit) costs one wasted build the first time only.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from tavernkit.models.chat import Message
from tavernkit.models.chat_window import MessageWindow, OutsideWindow

__all__ = [
    "FIRST_WINDOW",
    "GROWTH",
    "ReplayRng",
    "WindowSizes",
    "windowed",
    "windows",
    "without_last",
]

_T = TypeVar("_T")

#: Messages a turn loads first: more than a 4k-token context holds of ordinary messages.
FIRST_WINDOW = 160
GROWTH = 8


class WindowSizes:
    """The window that sufficed per chat, for the next turn of the chat (bounded, LRU)."""

    def __init__(self, first: int = FIRST_WINDOW, maxsize: int = 512) -> None:
        self.first = first
        self.maxsize = maxsize
        self._sizes: OrderedDict[str, int] = OrderedDict()

    def start(self, chat_id: str) -> int:
        size = self._sizes.get(chat_id)
        if size is None:
            return self.first
        self._sizes.move_to_end(chat_id)
        return size

    def grow(self, chat_id: str, size: int) -> int:
        bigger = size * GROWTH
        self._sizes[chat_id] = bigger
        self._sizes.move_to_end(chat_id)
        if len(self._sizes) > self.maxsize:
            self._sizes.popitem(last=False)
        return bigger

    def clear(self) -> None:
        self._sizes.clear()


#: The process's window sizes (a memo only: any size gives the same turn).
windows = WindowSizes()


async def windowed(chat_id: str, attempt: Callable[[int], Awaitable[_T]]) -> _T:
    """``attempt(window)`` until it does not read past its window (each retry with a window
    :data:`GROWTH` times larger). ``attempt`` must not write before it is done reading."""
    window = windows.start(chat_id)
    while True:
        try:
            return await attempt(window)
        except OutsideWindow:
            window = windows.grow(chat_id, window)


class ReplayRng:
    """``rng`` for a build that may be abandoned and redone: the redone build gets the numbers
    the abandoned one drew, in order, then fresh ones, so it is the build a single attempt over
    the whole chat would have made."""

    def __init__(self, rng: Callable[[], float]) -> None:
        self._rng = rng
        self._drawn: list[float] = []
        self._at = 0

    def restart(self) -> ReplayRng:
        self._at = 0
        return self

    def __call__(self) -> float:
        if self._at < len(self._drawn):
            value = self._drawn[self._at]
        else:
            value = self._rng()
            self._drawn.append(value)
        self._at += 1
        return value


def without_last(messages: Sequence[Message]) -> list[Message] | MessageWindow:
    """The messages but the newest (a window stays a window)."""
    if isinstance(messages, MessageWindow):
        return messages.without_last()
    return list(messages[:-1])
