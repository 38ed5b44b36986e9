"""The turns' event log batches of one process, written to Redis together: :class:`GroupWrite`.

Each running turn's :class:`~tavernkit.server.turn_log_writer.TurnLogWriter` writes its pieces
at most once a window, on ticks of one clock for the whole process, so the turns streaming at
once write in the same turn of the event loop. Here those writes become one pipeline: with eight
turns streaming, one round trip (and one wake-up) a window instead of eight. A write that
comes while one is being sent goes in the next; each caller learns what became of its own
commands (a refused entry fails its turn's write alone; a lost connection fails every turn's
write of that pipeline, and each writer tries again).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

__all__ = ["Command", "GroupWrite", "Queued"]

#: one queued command: the pipeline method's name and its arguments
Command = tuple[str, tuple[Any, ...], dict[str, Any]]


@dataclass
class Queued:
    """One caller's commands in the next pipeline, and its replies once sent."""

    commands: Sequence[Command]
    done: asyncio.Future[list[Any]] = field(init=False)

    def __post_init__(self) -> None:
        self.done = asyncio.get_running_loop().create_future()


class GroupWrite:
    """Commands of several callers sent as one pipeline, at the next turn of the loop."""

    def __init__(
        self, client: aioredis.Redis, guard: Callable[[], AbstractAsyncContextManager[None]]
    ) -> None:
        self._redis = client
        #: maps Redis's errors to the caller's (:class:`~tavernkit.errors.CoordinationError`)
        self._guard = guard
        self._next: list[Queued] = []
        self._sending: asyncio.Task[None] | None = None

    async def send(self, commands: Sequence[Command]) -> list[Any]:
        """Send ``commands`` with whatever others send now; their replies (errors included,
        as :class:`~redis.exceptions.ResponseError` values). A failed pipeline raises here."""
        queued = Queued(commands)
        self._next.append(queued)
        if self._sending is None or self._sending.done():
            self._sending = asyncio.create_task(self._send_all())
        return await queued.done

    async def _send_all(self) -> None:
        while self._next:
            group, self._next = self._next, []
            await self._send(group)

    async def _send(self, group: list[Queued]) -> None:
        try:
            async with self._guard(), self._redis.pipeline(transaction=False) as pipe:
                for queued in group:
                    for name, args, kwargs in queued.commands:
                        getattr(pipe, name)(*args, **kwargs)
                replies = await pipe.execute(raise_on_error=False)
        except BaseException as exc:
            for queued in group:
                if not queued.done.done():
                    queued.done.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        at = 0
        for queued in group:
            n = len(queued.commands)
            if not queued.done.done():  # a caller cancelled meanwhile: its replies go unread
                queued.done.set_result(list(replies[at : at + n]))
            at += n
