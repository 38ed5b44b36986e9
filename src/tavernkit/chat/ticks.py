"""One clock for every turn of a process: a periodic write waits for the next tick of it
(multiples of its period), so the turns streaming at once write at the same moment and the
writers batching them (the swipe writer, the Redis event log) send one batch, not one each."""

from __future__ import annotations

import math

__all__ = ["next_tick"]


def next_tick(last: float, period: float) -> float:
    """When a write that last went at ``last`` may go again: the first multiple of ``period``
    after it; at once (``last``) for a first write (``-inf``) or a period of 0."""
    if period <= 0 or not math.isfinite(last):
        return last
    return (math.floor(last / period) + 1) * period
