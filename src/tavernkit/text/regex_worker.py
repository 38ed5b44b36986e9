"""A worker process for regexes that may backtrack without end.

``regress`` holds the GIL while it matches, so a thread cannot interrupt a pattern like
``(a+)+$``; a child process can be killed. World-info keys
(:class:`tavernkit.worldinfo.regex_keys.RegexGuard`) and regex scripts
(:class:`tavernkit.text.regex_scripts.guard.ScriptRegexGuard`) each run their risky patterns
through one of these, with a worker script of their own (what they send and read back
differs). A request is one line of JSON in, the answer one line out; a request left
unanswered past its timeout kills the worker, and the next request starts a fresh one.
"""

from __future__ import annotations

import contextlib
import json
import select
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RegexWorker"]


@dataclass
class RegexWorker:
    """One worker process running ``script`` (Python source reading JSON lines on stdin and
    writing one line per request). Not thread-safe: a caller shared across threads locks."""

    script: str
    _process: subprocess.Popen[str] | None = field(default=None, repr=False)

    def ask(self, request: dict[str, Any], timeout_s: float) -> str | None:
        """The worker's answer to ``request`` (its line, without the newline); ``None`` when it
        gave none within ``timeout_s`` or died, after which the worker is gone."""
        process = self._running()
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            ready, _, _ = select.select([process.stdout], [], [], timeout_s)
            if ready:
                line = process.stdout.readline()
                if line:
                    return line.rstrip("\n")
        except OSError:
            pass
        self.close()
        return None

    def _running(self) -> subprocess.Popen[str]:
        process = self._process
        if process is None or process.poll() is not None:
            process = self._process = subprocess.Popen(
                [sys.executable, "-c", self.script],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                encoding="utf-8",
            )
        return process

    def close(self) -> None:
        """Kill the worker process, if one is running."""
        process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(OSError):
            process.kill()
        with contextlib.suppress(Exception):
            process.wait(timeout=5)
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # at interpreter exit, contextlib itself may be gone
            return
