"""Terminal input lines read without blocking the event loop.

``input()`` blocks, so each line is read in a daemon thread of its own (not the loop's executor:
an executor thread would keep the process waiting for Enter after Ctrl-C). Such a thread may
still be blocked in ``input()`` when the session ends; its name reports it
(:func:`.input_threads.input_still_blocked`). Ending the process over it is the entry point's
decision alone (:func:`tavernkit.cli.main`): a command run in-process (the tests, a plugin,
typer's runner) returns normally whatever its input thread is doing.

While a reply streams, :meth:`LineReader.typed_during` reads what is typed meanwhile (no
thread: the loop watches stdin), with the terminal's echo off so nothing typed lands inside the
reply: ``/stop`` stops the reply, any other line waits for the next prompt.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

try:
    import termios
except ImportError:  # not a POSIX terminal (Windows): typed lines are still read, echoed
    termios = None  # type: ignore[assignment]

from tavernkit.cli.input_threads import INPUT_THREAD_NAME

__all__ = ["LineReader"]


class LineReader:
    """Reads input lines for one session; owns the thread of the line being read."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        #: lines typed while a reply streamed, for the next reads
        self._pending: deque[str] = deque()
        #: what was typed of a line when the reply ended (a pipe's chunk), and end of input
        self._partial = ""
        self._ended = False

    @property
    def blocked(self) -> bool:
        """Whether this reader's thread is still waiting in ``input()``."""
        return self._thread is not None and self._thread.is_alive()

    async def read(self, prompt: str, interrupted: asyncio.Event) -> str | None:
        """One input line, or ``None`` at end of input or when ``interrupted`` is set."""
        if self._pending:
            typed = self._pending.popleft()
            sys.stdout.write(f"{prompt}{typed}\n")  # typed unechoed during the reply
            sys.stdout.flush()
            return typed
        if self._ended:
            return None
        partial, self._partial = self._partial, ""
        line = await self._read(prompt + partial, interrupted)
        return partial + line if line is not None else None

    async def _read(self, prompt: str, interrupted: asyncio.Event) -> str | None:
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

    @contextlib.contextmanager
    def typed_during(self, stop: Callable[[], object]) -> Iterator[None]:
        """While the block runs (a reply streaming), read the lines typed on stdin without
        echoing them: ``/stop`` calls ``stop``, other lines wait for the next :meth:`read`.
        Only a terminal is watched: it hands over one line at a time, so nothing typed can
        overtake what ``input()`` has buffered; a pipe (a script) or no file at all (typer's
        runner) is read in order at the prompts, and none is read while a line is."""
        try:
            fd = sys.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            fd = -1
        loop = asyncio.get_running_loop()
        if fd < 0 or not os.isatty(fd) or self.blocked or not self._watch(loop, fd, stop):
            yield
            return
        try:
            with _unechoed(fd):
                yield
        finally:
            loop.remove_reader(fd)

    def _watch(self, loop: asyncio.AbstractEventLoop, fd: int, stop: Callable[[], object]) -> bool:
        buffer = bytearray()

        def readable() -> None:
            try:
                chunk = os.read(fd, 4096)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                chunk = b""
            if not chunk:  # end of input: the session ends at its next prompt
                loop.remove_reader(fd)
                self._ended = True
                return
            buffer.extend(chunk)
            while b"\n" in buffer:
                raw, _, rest = bytes(buffer).partition(b"\n")
                buffer[:] = rest
                line = raw.decode("utf-8", "replace").rstrip("\r")
                if line.strip() == "/stop":
                    stop()
                else:
                    self._pending.append(line)
            self._partial = buffer.decode("utf-8", "replace")

        try:
            loop.add_reader(fd, readable)
        except (NotImplementedError, OSError, RuntimeError, ValueError):
            return False  # a loop or a file that cannot be watched
        return True


@contextlib.contextmanager
def _unechoed(fd: int) -> Iterator[None]:
    """The terminal's echo off (line editing stays on) while the block runs."""
    if termios is None:
        yield
        return
    try:
        before = termios.tcgetattr(fd)
    except termios.error:
        yield
        return
    quiet = list(before)
    quiet[3] = before[3] & ~termios.ECHO
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        with contextlib.suppress(termios.error):
            termios.tcsetattr(fd, termios.TCSANOW, before)
