"""One request to one resolved connection, with the provider's retry policy and an abort race.

This is the one-attempt plan of a task: the turn runner (``generation.turn.run_turn``) owns
multi-attempt plans (keys, fallbacks, continuation); a task needs neither continuation (tool
and JSON replies cannot be stitched) nor fallback yet, so it sends here. Every failure leaves as
a :class:`~tavernkit.errors.GenerateTaskError` decided by the error's type
(:func:`~tavernkit.errors.task_error_from`); text delivered before a terminal failure is in
``details["delivered_text"]``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from tavernkit.errors import GenerateTaskError, task_error_from
from tavernkit.generation.abort import AbortSignal
from tavernkit.generation.profiles import ResolvedConnection
from tavernkit.providers.accumulator import Accumulator, Completion
from tavernkit.providers.events import StreamEvent
from tavernkit.providers.request import PromptRequest
from tavernkit.providers.retry import RetryPolicy, call_with_retry

__all__ = ["BeforeRequest", "OnEvent", "send"]

OnEvent = Callable[[StreamEvent], Awaitable[None]]
#: may replace the outgoing request; gets ``(request, stream)``
BeforeRequest = Callable[[PromptRequest, bool], PromptRequest]


def _aborted(delivered: str) -> GenerateTaskError:
    return GenerateTaskError("aborted", "request aborted", details={"delivered_text": delivered})


async def send(
    connection: ResolvedConnection,
    request: PromptRequest,
    *,
    stream: bool,
    abort: AbortSignal | None = None,
    on_event: OnEvent | None = None,
    retry: RetryPolicy | None = None,
    before_request: BeforeRequest | None = None,
) -> Completion:
    """Send ``request`` and return the accumulated completion (see the module docstring)."""
    if before_request is not None:
        request = before_request(request, stream)
    if abort is not None and abort.aborted:
        raise _aborted("")
    live: list[Accumulator] = []

    async def once() -> Completion:
        accumulator = Accumulator()
        live.append(accumulator)
        events: Any = connection.provider.stream(
            request,
            model=connection.model,
            profile=connection.model_profile,
            stream=stream,
            abort=abort,
        )
        try:
            async for event in events:
                accumulator.feed(event)
                if on_event is not None:
                    await on_event(event)
        finally:
            with contextlib.suppress(Exception):
                await events.aclose()
        return accumulator.result()

    def delivered() -> str:
        return live[-1].text if live else ""

    work = asyncio.ensure_future(call_with_retry(once, retry or RetryPolicy()))
    waiter = asyncio.ensure_future(abort.wait()) if abort is not None else None
    try:
        if waiter is not None:
            await asyncio.wait({work, waiter}, return_when=asyncio.FIRST_COMPLETED)
        else:
            await asyncio.wait({work})
    except asyncio.CancelledError:
        work.cancel()
        with contextlib.suppress(BaseException):
            await work
        raise
    finally:
        if waiter is not None:
            waiter.cancel()
    if not work.done():
        # the abort won the race: stop the request wherever it is (even before its headers)
        work.cancel()
        with contextlib.suppress(BaseException):
            await work
        raise _aborted(delivered())
    try:
        completion = work.result()
    except GenerateTaskError:
        raise
    except Exception as exc:
        error = task_error_from(exc)
        if delivered():
            error.details.setdefault("delivered_text", delivered())
        raise error from exc
    if completion.finish_reason == "aborted" or (abort is not None and abort.aborted):
        raise _aborted(completion.text)
    if completion.error is not None:
        error = task_error_from(completion.error)
        error.details.setdefault("delivered_text", completion.text)
        raise error from completion.error
    return completion
