"""Waiting for work that must not stop halfway, even when the waiter is cancelled.

A store transaction's rollback and a streaming write already under way are such work: cut off
by a cancellation they would leave the connection inside a transaction, or a write lost that
the next one assumed was done. :func:`run_to_end` lets the waiter's cancellation through only
after the work has finished.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["run_to_end"]

T = TypeVar("T")


async def run_to_end(work: Awaitable[T]) -> T:
    """``work``'s result, awaited to its end: if the caller is cancelled meanwhile, the work
    goes on (it runs as its own task) and the cancellation is raised once it
    is done. An error of the work itself is raised as usual."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            # wait(), unlike awaiting the task, never passes the caller's cancellation on
            await asyncio.wait((task,))
        except asyncio.CancelledError:
            cancelled = True  # the caller's: keep waiting
    if cancelled:
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller gets
        raise asyncio.CancelledError
    return task.result()
