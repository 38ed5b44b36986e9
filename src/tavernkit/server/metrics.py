"""``ServerMetrics``: the Prometheus metrics one server app counts, served at ``GET /metrics``
in the text exposition format (:mod:`tavernkit.server.routes.metrics`).

Each app has its own :class:`~prometheus_client.CollectorRegistry`, not the library's global
default one: several apps in one process (the tests, a host embedding two) count apart and
never register a metric name twice.

What is counted: turns started (by verb) and finished (by status), failed turns by error
class, the turn event streams open now, the time from a turn's start to its first piece of
text and the time between its pieces (histograms), the configured pool sizes (Redis,
PostgreSQL) and the PostgreSQL pool's connections in use (redis-py tells no such count
publicly).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

__all__ = ["CONTENT_TYPE", "PieceTimer", "PooledStore", "ServerMetrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST

#: seconds from a turn's start to its first piece: an upstream's first token is 0.2-10 s
FIRST_PIECE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
#: seconds between two pieces of a turn: tokens arrive every few to a few hundred ms
PIECE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


@runtime_checkable
class PooledStore(Protocol):
    """A store that tells how many of its pool's connections are taken (PostgreSQL's)."""

    @property
    def connections_in_use(self) -> int: ...


class ServerMetrics:
    """The metrics of one server app, in a registry of its own (:meth:`render`)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.turns_started = Counter(
            "tavernkit_turns_started", "Chat turns started, by verb", ["verb"], registry=r
        )
        self.turns_finished = Counter(
            "tavernkit_turns_finished",
            "Chat turns ended, by status (ok, stopped, failed, ...)",
            ["status"],
            registry=r,
        )
        self.turn_failures = Counter(
            "tavernkit_turn_failures",
            "Chat turns that failed, by error class",
            ["error_class"],
            registry=r,
        )
        self.streams_open = Gauge(
            "tavernkit_streams_open", "Turn event streams being read now", registry=r
        )
        self.first_piece = Histogram(
            "tavernkit_turn_first_piece_seconds",
            "Seconds from a turn's start to its first piece of text or reasoning",
            buckets=FIRST_PIECE_BUCKETS,
            registry=r,
        )
        self.piece_interval = Histogram(
            "tavernkit_turn_piece_interval_seconds",
            "Seconds between two pieces of one turn",
            buckets=PIECE_BUCKETS,
            registry=r,
        )
        self.pool_size = Gauge(
            "tavernkit_pool_max_connections",
            "The most connections this process opens, by pool",
            ["pool"],
            registry=r,
        )
        self.pool_in_use = Gauge(
            "tavernkit_pool_connections_in_use",
            "Connections taken now, by pool (where the client tells)",
            ["pool"],
            registry=r,
        )

    def watch_store(self, store: object) -> None:
        """Report the store's pool connections in use, read at each scrape (a store without
        a pool, SQLite's, reports none)."""
        if isinstance(store, PooledStore):
            self.pool_in_use.labels(pool="database").set_function(lambda: store.connections_in_use)

    def turn_started(self, verb: str) -> PieceTimer:
        """Count a started turn; the timer its pieces are measured with."""
        self.turns_started.labels(verb=verb).inc()
        return PieceTimer(self)

    def turn_finished(self, status: str, error_class: str | None) -> None:
        self.turns_finished.labels(status=status).inc()
        if error_class is not None:
            self.turn_failures.labels(error_class=error_class).inc()

    def render(self) -> bytes:
        """The metrics in the text exposition format."""
        return generate_latest(self.registry)


class PieceTimer:
    """One turn's piece timing: the first piece's delay from the turn's start, then each
    piece's distance from the one before."""

    __slots__ = ("_last", "_metrics", "_started")

    def __init__(self, metrics: ServerMetrics) -> None:
        self._metrics = metrics
        self._started = metrics.clock()
        self._last: float | None = None

    def piece(self) -> None:
        now = self._metrics.clock()
        if self._last is None:
            self._metrics.first_piece.observe(now - self._started)
        else:
            self._metrics.piece_interval.observe(now - self._last)
        self._last = now
