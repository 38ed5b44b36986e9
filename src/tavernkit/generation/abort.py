"""One abort type for the whole library: :class:`AbortController` and its :class:`AbortSignal`.

Every call that can be cancelled takes ``abort: AbortSignal | None``. The signal satisfies the
small protocols the lower layers read (``is_set()`` for the tool loop, ``is_set()`` plus an
awaitable ``wait()`` for the HTTP readers), so one object reaches from a plugin's button down
to the socket. Cancelling the asyncio task works too; the signal is for callers that want to
stop a generation from somewhere else (another task, a UI handler, ``stop_generation()``).

:class:`ActiveGenerations` is the per-``Tavern`` book of what is running, by chat, so
``ctx.stop_generation()`` stops only the generations of its own chat and
``ctx.streaming_processor`` can show the one in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from tavernkit.errors import RequestAborted

__all__ = [
    "AbortController",
    "AbortError",
    "AbortSignal",
    "ActiveGenerations",
    "StreamingProcessor",
]


class AbortError(RequestAborted):
    """Raised by :meth:`AbortSignal.throw_if_aborted`; a
    :class:`~tavernkit.errors.RequestAborted`, which
    :func:`tavernkit.errors.task_error_from` maps to ``aborted``."""


class AbortSignal:
    """Read-only side of an :class:`AbortController`.

    ``aborted`` flips once and stays; ``reason`` says why. Listeners run synchronously, once,
    when the signal aborts (immediately when added to an aborted signal).
    """

    __slots__ = ("_event", "_listeners", "aborted", "reason")

    def __init__(self) -> None:
        self.aborted = False
        self.reason: Any = None
        self._event: asyncio.Event | None = None
        self._listeners: list[Callable[[AbortSignal], object]] = []

    # the two protocols the lower layers use -------------------------------------------------

    def is_set(self) -> bool:
        return self.aborted

    async def wait(self) -> bool:
        """Return once the signal aborts."""
        if self.aborted:
            return True
        if self._event is None:
            self._event = asyncio.Event()
        await self._event.wait()
        return True

    # for callers ----------------------------------------------------------------------------

    def throw_if_aborted(self) -> None:
        if self.aborted:
            raise AbortError(self.reason if self.reason is not None else "aborted")

    def add_listener(self, listener: Callable[[AbortSignal], object]) -> Callable[[], None]:
        """Call ``listener(signal)`` on abort; returns a function that removes it."""
        if self.aborted:
            listener(self)
            return lambda: None
        self._listeners.append(listener)

        def remove() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return remove

    def _fire(self, reason: Any) -> bool:
        if self.aborted:
            return False
        self.aborted = True
        self.reason = reason
        if self._event is not None:
            self._event.set()
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            # a failing listener must not keep the others (or the abort itself) from running
            with contextlib.suppress(Exception):
                listener(self)
        return True

    @staticmethod
    def any(*signals: AbortSignal | None) -> AbortSignal:
        """A signal that aborts when any of ``signals`` does (``None`` entries are ignored)."""
        controller = AbortController()
        for signal in signals:
            if signal is not None:
                signal.add_listener(lambda s: controller.abort(s.reason))
        return controller.signal

    def __repr__(self) -> str:
        return f"AbortSignal(aborted={self.aborted!r})"


class AbortController:
    """Owns an :class:`AbortSignal`; :meth:`abort` aborts it (idempotent)."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: Any = None) -> bool:
        """Abort the signal; ``False`` when it was already aborted."""
        return self.signal._fire(reason if reason is not None else "aborted")

    @property
    def aborted(self) -> bool:
        return self.signal.aborted


StreamState = Literal["streaming", "finished", "failed", "aborted"]


@dataclass
class StreamingProcessor:
    """A read-only view of the generation in flight: text, reasoning and tool calls so far.

    The generation updates it; callers only read. ``tool_calls`` holds ``(name, arguments
    text)`` pairs as they arrive.
    """

    model: str | None = None
    text: str = ""
    reasoning: str = ""
    tool_calls: list[tuple[str, str]] = field(default_factory=list)
    state: StreamState = "streaming"


class ActiveGenerations:
    """What is running on one ``Tavern``, keyed by chat id (``None``: no chat)."""

    def __init__(self) -> None:
        self._running: dict[str | None, list[tuple[AbortController, StreamingProcessor]]] = {}

    @contextlib.contextmanager
    def track(
        self, chat_id: str | None, controller: AbortController, processor: StreamingProcessor
    ) -> Iterator[StreamingProcessor]:
        entries = self._running.setdefault(chat_id, [])
        entry = (controller, processor)
        entries.append(entry)
        try:
            yield processor
        finally:
            with contextlib.suppress(ValueError):
                entries.remove(entry)
            if not entries:
                self._running.pop(chat_id, None)

    def stop(self, chat_id: str | None) -> bool:
        """Abort every generation of ``chat_id``; whether anything was running."""
        stopped = False
        for controller, _ in list(self._running.get(chat_id, ())):
            stopped = controller.abort("stopped") or stopped
        return stopped

    def current(self, chat_id: str | None) -> StreamingProcessor | None:
        """The newest generation of ``chat_id`` still running, or ``None`` when idle."""
        entries = self._running.get(chat_id)
        return entries[-1][1] if entries else None
