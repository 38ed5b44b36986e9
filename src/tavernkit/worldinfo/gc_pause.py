"""The cyclic garbage collector paused while a book is compiled and indexed."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused (if it runs) while a book is compiled and indexed.

    Compiling a big book allocates tens of thousands of objects, none in a cycle, and every
    700 allocations start a collection; now and then one walks the whole heap, which in a
    process holding long chats and books costs more than the compile itself.

    What was made is kept (a compiled book, an index), so on the way out it goes straight to
    the oldest generation (``freeze`` then ``unfreeze``: two list splices) instead of being
    walked by the first young collection after the pause, which would cost a few
    milliseconds for a big book. The process's other young objects move with it (a cycle
    among them waits for the next full collection). Skipped when the process has frozen
    objects of its own, which ``unfreeze`` would thaw.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()
