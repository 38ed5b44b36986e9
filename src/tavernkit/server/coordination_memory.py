"""The in-memory :class:`~tavernkit.server.coordination.RateLimiter` of a single-process
server (several processes share the Redis one instead)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from tavernkit.server.coordination import RateDecision

__all__ = ["InMemoryRateLimiter"]


class InMemoryRateLimiter:
    """A sliding-window log per key: an event is allowed when fewer than ``limit`` allowed
    events of that key fall within the last ``window_s`` seconds. Refused events are not
    counted, so a client that keeps hammering is let in again as soon as the window frees a
    slot. ``clock`` (monotonic seconds) is injectable for tests."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        #: key -> (its window, the times of its allowed events in that window)
        self._events: dict[str, tuple[float, deque[float]]] = {}

    async def hit(self, key: str, *, limit: int, window_s: float) -> RateDecision:
        now = self._clock()
        events = self._events.setdefault(key, (window_s, deque()))[1]
        while events and events[0] <= now - window_s:
            events.popleft()
        if len(events) >= limit:
            return RateDecision(False, retry_after_s=max(events[0] + window_s - now, 0.0))
        events.append(now)
        if len(self._events) > 4096:
            self._forget_idle(now)
        return RateDecision(True)

    def _forget_idle(self, now: float) -> None:
        # keys whose newest event left their window hold nothing a later hit needs
        idle = [k for k, (w, ev) in self._events.items() if not ev or ev[-1] <= now - w]
        for key in idle:
            del self._events[key]
