"""``/stop`` typed in ``tavernkit chat`` while a reply streams stops the reply (the text shown
is kept, marked stopped), and what is typed then is not echoed into the reply; another line
typed then runs at the next prompt. Driven through a real terminal (a pty); a script on a pipe
is read in order at the prompts."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time
from pathlib import Path

from chat._server import HangReply
from cli.test_chat_cli import _MAIN, ThreadServer, home, messages, server

__all__ = ["home", "server"]  # fixtures used here

STOPPED = "[stopped; the text shown is kept]"


def _read_until(fd: int, needle: str, seen: bytearray, timeout: float = 20) -> str:
    """The child's output up to ``needle`` (read without blocking, so a hang fails)."""
    deadline = time.monotonic() + timeout
    os.set_blocking(fd, False)
    while needle.encode() not in seen:
        if time.monotonic() > deadline:
            raise AssertionError(f"{needle!r} never came; got {bytes(seen)!r}")
        try:
            chunk = os.read(fd, 65536)
        except (BlockingIOError, OSError):
            chunk = b""
        if chunk:
            seen += chunk
        else:
            time.sleep(0.05)
    return seen.decode("utf-8", "replace")


def _chat(home: Path, stdin: int) -> tuple[subprocess.Popen[bytes], int]:
    """``tavernkit chat Mira`` with ``stdin``; its output comes on the returned descriptor."""
    env = {**os.environ, "TAVERNKIT_HOME": str(home), "COLUMNS": "200", "TERM": "dumb"}
    reader, writer = pty.openpty() if stdin < 0 else os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-c", _MAIN, "chat", "Mira"],
        env=env,
        stdin=writer if stdin < 0 else stdin,
        stdout=writer,
        stderr=subprocess.DEVNULL,
    )
    os.close(writer)
    return proc, reader


def test_stop_typed_in_a_terminal_stops_the_reply_unechoed(
    home: Path, server: ThreadServer
) -> None:
    server.script(HangReply(text="The lamp is lit. and the rest never arrives", hang_after=4))
    proc, tty = _chat(home, -1)  # stdin and stdout: one pseudo-terminal
    seen = bytearray()
    try:
        _read_until(tty, "/help for commands", seen)
        os.write(tty, b"Hello\n")
        _read_until(tty, "The lamp is lit.", seen)
        during = len(seen)
        os.write(tty, b"/stop\n")
        text = _read_until(tty, STOPPED, seen)
        # the terminal did not echo the typed command into the streaming reply
        assert "/stop" not in bytes(seen[during:]).decode("utf-8", "replace")
        os.write(tty, b"/quit\n")
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(tty)
    assert text.count("The lamp is lit.") == 1
    reply = messages(home)[-1]
    assert reply.mes.startswith("The lamp is lit.") and "/stop" not in reply.mes


def test_a_line_typed_during_the_reply_runs_after_it(home: Path, server: ThreadServer) -> None:
    server.script(HangReply(text="The lamp is lit. and the rest never arrives", hang_after=4))
    proc, tty = _chat(home, -1)
    seen = bytearray()
    try:
        _read_until(tty, "/help for commands", seen)
        os.write(tty, b"Hello\n")
        _read_until(tty, "The lamp is lit.", seen)
        os.write(tty, b"/history 1\n")
        time.sleep(0.3)
        os.write(tty, b"/stop\n")
        _read_until(tty, STOPPED, seen)
        text = _read_until(tty, "[stopped before the end", seen)  # what /history says of it
        os.write(tty, b"/quit\n")
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(tty)
    before, after = text.split(STOPPED, 1)
    assert "/history" not in before  # typed during the reply: not echoed into it
    assert "> /history 1" in after  # shown at the next prompt, then run


def test_a_piped_script_runs_in_order(home: Path, server: ThreadServer) -> None:
    """A script on a pipe is read at the prompts only, every line in its order."""
    from chat._server import Reply

    server.script(Reply(text="First reply."), Reply(text="Second reply."))
    stdin_read, stdin_write = os.pipe()
    os.write(stdin_write, b"Hello\nAgain\n/history 2\n/quit\n")
    os.close(stdin_write)
    proc, out = _chat(home, stdin_read)
    os.close(stdin_read)
    seen = bytearray()
    try:
        text = _read_until(out, "Second reply.\n", seen)
        text = _read_until(out, "earlier messages", seen)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(out)
    assert text.index("First reply.") < text.index("Second reply.")
    assert [m.mes for m in messages(home)][-4:] == [
        "Hello",
        "First reply.",
        "Again",
        "Second reply.",
    ]
