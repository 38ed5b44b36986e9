"""The cyclic garbage collector paused while a book is compiled and indexed."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["PROMOTE_AT", "gc_paused"]

#: Objects allocated while paused from which they go straight to the oldest generation.
PROMOTE_AT = 20_000


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused (if it runs) while a book is compiled and indexed.

    Compiling a big book allocates tens of thousands of objects, none in a cycle, and every
    700 allocations start a collection; now and then one walks the whole heap, which in a
    process holding long chats and books costs more than the compile itself.

    What a big compile made is kept (a compiled book, an index), so when the pause allocated
    at least :data:`PROMOTE_AT` objects they go straight to the oldest generation on the way
    out (``freeze`` then ``unfreeze``: two list splices) instead of being walked by the first
    young collection after the pause, a few milliseconds for a big book. The process's other
    young objects move with them, and the collector's generation counters restart: fine once
    per compile, not on every scan (a pause that only found its index cached allocates
    little), where it would keep putting off the collections that free cycles. Skipped when
    the process has frozen objects of its own, which ``unfreeze`` would thaw.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_count()[0] >= PROMOTE_AT and gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()
