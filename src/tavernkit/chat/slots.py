"""One generation per chat at a time.

Two turns of one chat would append replies in the order they finish, not the order they were
asked, and both would stream into the store at once; so a second turn is refused with
:class:`~tavernkit.errors.ChatBusy`. ``interrupt=True`` aborts the running turn and waits for it
to end (it stores what it delivered) before the new one starts, so turns still never
interleave.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from tavernkit.errors import ChatBusy
from tavernkit.generation.abort import AbortController

__all__ = ["ChatSlots"]


@dataclass
class _ChatSlot:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    controller: AbortController | None = None
    waiting: int = 0


class ChatSlots:
    """The per-chat turn locks of one chat service."""

    def __init__(self) -> None:
        self._slots: dict[str, _ChatSlot] = {}

    def busy(self, chat_id: str) -> bool:
        slot = self._slots.get(chat_id)
        return slot is not None and slot.lock.locked()

    def stop(self, chat_id: str, reason: str = "stopped") -> bool:
        """Abort the running turn of ``chat_id``; whether one was running."""
        slot = self._slots.get(chat_id)
        if slot is None or slot.controller is None:
            return False
        return slot.controller.abort(reason)

    @contextlib.asynccontextmanager
    async def turn(
        self, chat_id: str, *, interrupt: bool = False
    ) -> AsyncIterator[AbortController]:
        """Hold ``chat_id`` for one turn; yields the turn's abort controller."""
        slot = self._slots.setdefault(chat_id, _ChatSlot())
        if slot.lock.locked():
            if not interrupt:
                raise ChatBusy(chat_id)
            if slot.controller is not None:
                slot.controller.abort("interrupted")
        slot.waiting += 1
        try:
            await slot.lock.acquire()
        finally:
            slot.waiting -= 1
        controller = AbortController()
        slot.controller = controller
        try:
            yield controller
        finally:
            slot.controller = None
            slot.lock.release()
            if not slot.waiting and not slot.lock.locked():
                self._slots.pop(chat_id, None)
