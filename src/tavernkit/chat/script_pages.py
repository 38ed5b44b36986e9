"""A stored chat's messages as a script sees them: read from the store a page at a time.

A script reads a few messages of its chat (the tail, for ``{{lastMessage}}``; a range, for
``/messages 0-5``) and changes a few (``/sendas``, ``/hide``, ``/cut``); loading every message to
run one made a quick-reply click on a 20,000-message chat cost about a second.
:class:`ChatPages` is the chat as :attr:`~tavernkit.stscript.host.ScriptHost.chat`: its length
is the whole chat's, each message sits at its absolute index (inserts and deletes move the later
ones, as in a list), and only the messages loaded are held. The host awaits :meth:`ChatPages.load`
before a command reads a range (:meth:`~tavernkit.stscript.host.ScriptHost.load_messages`);
reading a message that was not loaded raises :class:`~tavernkit.errors.OutsideWindow`, so a
command that forgot to load never answers from a partial chat.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Iterable, MutableSequence, Sequence
from dataclasses import dataclass
from typing import Any, overload

from tavernkit.errors import OutsideWindow
from tavernkit.store.chat_types import StoredMessage

__all__ = ["ChatPages", "MessageLoader", "runs"]

#: messages ``start`` to ``stop - 1`` of the chat, oldest first (``Store.load_message_range``)
MessageLoader = Callable[[int, int], Awaitable[Sequence[StoredMessage]]]


@dataclass(slots=True)
class _Row:
    """A loaded message: its stored id (None until the store gave it one) and its data."""

    id: str | None
    data: dict[str, Any]


class ChatPages(MutableSequence[dict[str, Any]]):
    """A chat of ``length`` messages of which the loaded ones are held (see the module
    docstring); ``loader`` reads more."""

    __slots__ = ("_length", "_loader", "_rows")

    def __init__(self, length: int, loader: MessageLoader) -> None:
        self._length = length
        self._loader = loader
        self._rows: dict[int, _Row] = {}

    def hold(self, start: int, messages: Iterable[StoredMessage]) -> None:
        """Keep ``messages`` (read from the store) as the messages from index ``start`` on;
        copies, so what a script changes is stored only through the host."""
        for offset, message in enumerate(messages):
            self._rows[start + offset] = _Row(message.id, copy.deepcopy(message.data))

    async def load(self, start: int, stop: int) -> None:
        """Read the messages ``start`` to ``stop - 1`` not held yet (one read per gap)."""
        missing = [i for i in range(max(start, 0), min(stop, self._length)) if i not in self._rows]
        for first, count in runs(missing):
            self.hold(first, await self._loader(first, first + count))

    @property
    def loaded(self) -> int:
        """How many messages are held (what the store was asked for, less what went)."""
        return len(self._rows)

    def message_id(self, index: int) -> str:
        """The stored id of the message at ``index``."""
        row = self._row(index)
        if row.id is None:  # pragma: no cover - the host sets it as it stores the message
            raise RuntimeError(f"message {index} is not stored yet")
        return row.id

    def set_id(self, index: int, message_id: str) -> None:
        self._row(index).id = message_id

    def drop(self, start: int, count: int) -> None:
        """Drop ``count`` messages from ``start``: the later ones move up."""
        count = max(0, min(count, self._length - start))
        for index in range(start, start + count):
            self._rows.pop(index, None)
        self._shift(start + count, -count)
        self._length -= count

    # -- the list a script reads ------------------------------------------------------------

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [self._row(i).data for i in range(*index.indices(self._length))]
        return self._row(index).data

    @overload
    def __setitem__(self, index: int, value: dict[str, Any]) -> None: ...

    @overload
    def __setitem__(self, index: slice, value: Iterable[dict[str, Any]]) -> None: ...

    def __setitem__(self, index: int | slice, value: Any) -> None:
        if isinstance(index, slice):
            raise TypeError("a stored chat's messages change one at a time")
        self._row(index).data = value

    @overload
    def __delitem__(self, index: int) -> None: ...

    @overload
    def __delitem__(self, index: slice) -> None: ...

    def __delitem__(self, index: int | slice) -> None:
        if isinstance(index, slice):
            raise TypeError("a stored chat's messages are deleted with drop()")
        self.drop(self._index(index), 1)

    def insert(self, index: int, value: dict[str, Any]) -> None:
        """As ``list.insert``: the message at ``index`` (clamped to the chat), not stored yet
        (:meth:`set_id` once it is)."""
        at = max(0, index + self._length) if index < 0 else min(index, self._length)
        self._shift(at, 1)
        self._rows[at] = _Row(None, value)
        self._length += 1

    def __repr__(self) -> str:
        return f"ChatPages(length={self._length}, loaded={len(self._rows)})"

    # -- inside -----------------------------------------------------------------------------

    def _index(self, index: int) -> int:
        at = index + self._length if index < 0 else index
        if not 0 <= at < self._length:
            raise IndexError("message index out of range")
        return at

    def _row(self, index: int) -> _Row:
        at = self._index(index)
        row = self._rows.get(at)
        if row is None:
            raise OutsideWindow(at)
        return row

    def _shift(self, start: int, by: int) -> None:
        """Move the held messages from ``start`` on by ``by`` places."""
        moved = {i: row for i, row in self._rows.items() if i >= start}
        for index in moved:
            del self._rows[index]
        for index, row in moved.items():
            self._rows[index + by] = row


def runs(indices: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted ``indices`` as runs of consecutive ones: ``(first, count)`` each."""
    out: list[tuple[int, int]] = []
    for index in indices:
        if out and out[-1][0] + out[-1][1] == index:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((index, 1))
    return out
