"""Terminal input lines read without blocking the event loop.

``input()`` blocks, so each line is read in a daemon thread of its own (not the loop's executor:
an executor thread would keep the process waiting for Enter after Ctrl-C). Such a thread may
still be blocked in ``input()`` when the session ends; the reader only reports it
(:func:`input_still_blocked`). Ending the process over it is the entry point's decision alone
(:func:`tavernkit.cli.main`): a command run in-process (the tests, a plugin, typer's runner)
returns normally whatever its input thread is doing.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

__all__ = ["INPUT_THREAD_NAME", "LineReader", "input_still_blocked"]

#: the name of every reader thread, so the entry point can find one still blocked
INPUT_THREAD_NAME = "tavernkit-input"


class LineReader:
    """Reads input lines for one session; owns the thread of the line being read."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None

    @property
    def blocked(self) -> bool:
        """Whether this reader's thread is still waiting in ``input()``."""
        return self._thread is not None and self._thread.is_alive()

    async def read(self, prompt: str, interrupted: asyncio.Event) -> str | None:
        """One input line, or ``None`` at end of input or when ``interrupted`` is set."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[str | None] = loop.create_future()

        def settle(value: str | None) -> None:
            if not done.done():
                done.set_result(value)

        def reader() -> None:
            try:
                line: str | None = input(prompt)
            except (EOFError, KeyboardInterrupt, ValueError, OSError):
                line = None
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(settle, line)

        self._thread = threading.Thread(target=reader, name=INPUT_THREAD_NAME, daemon=True)
        self._thread.start()
        stop: asyncio.Future[Any] = asyncio.ensure_future(interrupted.wait())
        try:
            await asyncio.wait((done, stop), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        return done.result() if done.done() else None


def input_still_blocked() -> bool:
    """Whether any reader thread of this process is still blocked in ``input()``: finalizing
    the interpreter under a thread holding stdin's lock aborts it, so the entry point ends the
    process at once instead."""
    return any(
        thread.name == INPUT_THREAD_NAME and thread.is_alive() for thread in threading.enumerate()
    )
