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
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
