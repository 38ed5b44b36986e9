"""The garbage collector of a serving process: full collections on a timer, not on growth.

CPython starts a full (generation 2) collection whenever the objects that survived into the
oldest generation grew by a quarter since the last one. A server holding hundreds of streamed
turns grows that quickly (every turn's events stay readable for late reconnects), and each
full collection walks every object the process holds: with 500 concurrent streams they came
every few seconds and paused the loop 100-340 ms each, the whole of the streams' p99
(``TAVERNKIT_BENCH_GC_LOG`` in ``benchmarks/server.py``).

:func:`tune_for_serving` freezes what start-up made (imports, the app: never garbage), leaves
the young generations' collections as they are (they free the short cycles a turn makes, in
well under a millisecond) and turns the growth rule off; :func:`full_collections` then runs
one full collection every ``interval_s``, so cycles that outlived the young generations are
still freed, a few times an hour instead of every few seconds. Only the serving process does
this (``ServerSettings.gc_full_every_s``): a library user's process keeps Python's defaults.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable

__all__ = ["full_collections", "tune_for_serving"]

log = logging.getLogger(__name__)

#: the oldest generation's threshold when full collections are the timer's: never reached
_NEVER = 1 << 30


def tune_for_serving() -> Callable[[], None]:
    """Freeze the objects made so far and stop growth-triggered full collections; returns
    what puts Python's behaviour back (the app's shutdown calls it)."""
    before = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(before[0], before[1], _NEVER)

    def restore() -> None:
        gc.set_threshold(*before)
        gc.unfreeze()

    return restore


async def full_collections(interval_s: float) -> None:
    """One full collection every ``interval_s`` seconds, until cancelled."""
    while True:
        await asyncio.sleep(interval_s)
        started = time.perf_counter()
        found = gc.collect()
        log.debug(
            "full collection: %d unreachable, %.0f ms",
            found,
            (time.perf_counter() - started) * 1000,
        )
