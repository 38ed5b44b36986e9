"""When to try the same request again — and only that.

Retry repeats one request against the same model and key after a transient failure; moving to
another key or model is fallback, which is policy in ``generation/`` and switches on the error
classes. The rules follow the official SDKs (reference §1.6):

- the provider's ``x-should-retry`` header wins when present;
- otherwise retry what is transient: 408, 409, 429 rate limits, 5xx and 529 (the error
  classes with ``retryable``), never quota, auth, bad requests or context overflow;
- wait ``retry-after-ms`` / ``retry-after`` when given, but give up when the server asks for
  more than ``max_retry_after`` (120 s) — a fallback is better than a two-minute stall;
- else back off ``min(base · 2^attempt, max_delay)`` minus up to 25 % jitter;
- ``rate_limits=False`` leaves a rate limit to the key pool: when another key is ready,
  moving to it beats waiting out this one's ``Retry-After`` (the turn runner sets it then).

Only failures before the first event are retried here; a stream that broke after text arrived
is a continuation problem, not a retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tavernkit.errors import ProviderError, RateLimited
from tavernkit.providers.accumulator import Accumulator, Completion
from tavernkit.providers.events import StreamEvent

__all__ = ["RetryPolicy", "accumulate", "call_with_retry"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 2
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 120.0
    jitter: float = 0.25
    #: retry a rate limit on the same key (``False``: the next key of the pool takes it)
    rate_limits: bool = True

    def should_retry(self, error: ProviderError, attempt: int) -> bool:
        """Whether attempt number ``attempt`` (0 = the first try) may be followed by another."""
        if attempt >= self.max_retries:
            return False
        if not self.rate_limits and isinstance(error, RateLimited):
            return False
        if error.should_retry is not None:
            return error.should_retry
        if not error.retryable:
            return False
        return error.retry_after is None or error.retry_after <= self.max_retry_after

    def delay(self, error: ProviderError, attempt: int, rng: random.Random) -> float:
        if error.retry_after is not None:
            return min(error.retry_after, self.max_retry_after)
        backoff: float = min(self.base_delay * (2.0**attempt), self.max_delay)
        return backoff * (1.0 - self.jitter * rng.random())


async def call_with_retry(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    rng: random.Random | None = None,
) -> T:
    """``await fn()``, retrying per ``policy``; the last error propagates."""
    rng = rng or random.Random()
    attempt = 0
    while True:
        try:
            return await fn()
        except ProviderError as error:
            if not policy.should_retry(error, attempt):
                raise
            await sleep(policy.delay(error, attempt, rng))
            attempt += 1


async def accumulate(
    open_stream: Callable[[], AsyncIterator[StreamEvent]], retry: RetryPolicy | None = None
) -> Completion:
    """The accumulated :class:`Completion` of a fresh stream from ``open_stream``; with
    ``retry``, a failure before any event opens a new stream (every provider's ``complete``)."""

    async def once() -> Completion:
        accumulator = Accumulator()
        async with contextlib.aclosing(open_stream()) as events:  # type: ignore[type-var]
            async for event in events:
                accumulator.feed(event)
        return accumulator.result()

    if retry is None:
        return await once()
    return await call_with_retry(once, retry)
