"""The terminal's reader threads, by name: what the entry point checks as the process ends
(:func:`tavernkit.cli.main`), without importing the reader itself (:mod:`.line_input`, which
needs asyncio: ``tavernkit --help`` does not)."""

from __future__ import annotations

import threading

__all__ = ["INPUT_THREAD_NAME", "input_still_blocked"]

#: the name of every reader thread, so the entry point can find one still blocked
INPUT_THREAD_NAME = "tavernkit-input"


def input_still_blocked() -> bool:
    """Whether any reader thread of this process is still blocked in ``input()``: finalizing
    the interpreter under a thread holding stdin's lock aborts it, so the entry point ends the
    process at once instead."""
    return any(
        thread.name == INPUT_THREAD_NAME and thread.is_alive() for thread in threading.enumerate()
    )
