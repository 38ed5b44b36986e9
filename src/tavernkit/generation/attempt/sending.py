"""How one attempt's provider sends: request hooks, same-request retry, abort, observation.

The turn runner wraps the provider of every attempt in :class:`SendingProvider`, so each rule
holds for every outgoing request of a turn (tool rounds, revisions and review calls included):

- ``before_request(request, stream)`` sees the final request (after per-attempt adaptation)
  and may return a replacement; plugins' ``before_request`` hooks come in through it;
- ``retry`` repeats the same request with the same key after a transient failure *before the
  first event* (the provider's retry policy: 429/5xx with back-off, ``Retry-After``
  honoured). Moving to another key or model is the plan's business, not this one's, and a
  stream that broke after output began is a continuation, never a retry;
- an abort that arrives before the first event stops the request where it is (a hung
  connection has no event loop of its own to notice); afterwards the provider's stream checks
  the abort itself;
- ``observe`` sees every provider event as it arrives (a live view: the streaming processor,
  a caller's ``on_event``).

Everything runs in the caller's task (no helper task reads the stream), so HTTP clients and
timeouts that belong to a task stay in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from tavernkit.errors import ProviderError
from tavernkit.generation.options import BeforeRequest as BeforeRequest
from tavernkit.generation.options import Observe as Observe
from tavernkit.generation.options import TurnOptions
from tavernkit.providers.accumulator import Accumulator, Completion
from tavernkit.providers.events import Finish, StreamEvent
from tavernkit.providers.http import AbortLike
from tavernkit.providers.profiles import ModelProfile
from tavernkit.providers.request import PromptRequest
from tavernkit.providers.retry import RetryPolicy

if TYPE_CHECKING:
    from tavernkit.providers.provider import Provider

__all__ = [
    "BeforeRequest",
    "Observe",
    "ProviderWrapper",
    "SendingProvider",
    "Sleep",
    "sending_provider",
]

Sleep = Callable[[float], Awaitable[object]]

_ABORTED = object()


class ProviderWrapper:
    """``inner`` (anything with the provider's ``stream``) with its stream changed by
    :meth:`_stream`; every other attribute (adapter, profile, base_url...) is the inner
    provider's, so callers that read them from the provider still can."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name: str = str(getattr(inner, "name", ""))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def stream(
        self,
        request: PromptRequest,
        *,
        model: str | None = None,
        profile: ModelProfile | None = None,
        stream: bool = True,
        abort: AbortLike | None = None,
    ) -> AsyncIterator[StreamEvent]:
        return self._stream(request, model, profile, stream, abort)

    def _stream(
        self,
        request: PromptRequest,
        model: str | None,
        profile: ModelProfile | None,
        stream: bool,
        abort: AbortLike | None,
    ) -> AsyncIterator[StreamEvent]:
        raise NotImplementedError


#: a retry's jitter when no generator is given: one per process (seeding one per request read
#: the OS's entropy on every turn and completion, retried or not)
_JITTER = random.Random()


class SendingProvider(ProviderWrapper):
    """``inner`` with the sending rules above."""

    def __init__(
        self,
        inner: Any,
        *,
        before_request: BeforeRequest | None = None,
        retry: RetryPolicy | None = None,
        observe: Observe | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(inner)
        self.before_request = before_request
        self.retry = retry
        self.observe = observe
        self.sleep = sleep
        self.rng = rng or _JITTER

    async def complete(
        self,
        request: PromptRequest,
        *,
        model: str | None = None,
        profile: ModelProfile | None = None,
        stream: bool = False,
        abort: AbortLike | None = None,
        retry: RetryPolicy | None = None,
    ) -> Completion:
        """The accumulated result of :meth:`stream` (``retry`` is this wrapper's own)."""
        accumulator = Accumulator()
        async for event in self.stream(
            request, model=model, profile=profile, stream=stream, abort=abort
        ):
            accumulator.feed(event)
        return accumulator.result()

    async def _stream(
        self,
        request: PromptRequest,
        model: str | None,
        profile: ModelProfile | None,
        stream: bool,
        abort: AbortLike | None,
    ) -> AsyncIterator[StreamEvent]:
        if self.before_request is not None:
            changed = self.before_request(request, stream)
            if changed is not None:
                request = changed
        tries = 0
        while True:
            if abort is not None and abort.is_set():
                yield Finish("aborted", None)
                return
            events = self.inner.stream(
                request, model=model, profile=profile, stream=stream, abort=abort
            )
            try:
                first = await _first_event(events, abort)
            except ProviderError as error:
                await _close(events)
                if self.retry is None or not self.retry.should_retry(error, tries):
                    raise
                await self.sleep(self.retry.delay(error, tries, self.rng))
                tries += 1
                continue
            break
        try:
            if first is _ABORTED:
                yield Finish("aborted", None)
                return
            if first is None:
                return
            observe = self.observe
            if observe is None:
                yield first
                async for event in events:
                    yield event
                return
            await _call(observe, first)
            yield first
            async for event in events:
                await _call(observe, event)
                yield event
        finally:
            await _close(events)


def sending_provider(
    provider: Provider, options: TurnOptions, abort: AbortLike | None, sleep: Sleep
) -> Provider:
    """A turn's attempt provider behind the sending rules (itself when none applies)."""
    if (
        options.retry is None
        and options.before_request is None
        and options.observe is None
        and abort is None
    ):
        return provider
    wrapped = SendingProvider(
        provider,
        before_request=options.before_request,
        retry=options.retry,
        observe=options.observe,
        sleep=sleep,
    )
    return cast("Provider", wrapped)


async def _call(observe: Observe, event: StreamEvent) -> None:
    result = observe(event)
    if inspect.isawaitable(result):
        await result


async def _close(events: Any) -> None:
    close = getattr(events, "aclose", None)
    if close is not None:
        with contextlib.suppress(Exception):
            await close()


async def _first_event(events: Any, abort: AbortLike | None) -> Any:
    """The first event (``None``: the stream was empty; ``_ABORTED``: the abort came first).

    The abort cancels the current task while it waits; the cancellation is taken back
    (``uncancel``) so only the request stops, never the caller.
    """
    if abort is None:
        try:
            return await events.__anext__()
        except StopAsyncIteration:
            return None
    task = asyncio.current_task()
    assert task is not None
    state = {"active": True, "fired": False}

    def stop(_: object) -> None:
        # a done callback runs later, from the loop: only while we still wait
        if state["active"]:
            state["fired"] = True
            task.cancel()

    waiting = asyncio.ensure_future(abort.wait())
    waiting.add_done_callback(stop)
    try:
        first = await events.__anext__()
    except StopAsyncIteration:
        first = None
    except asyncio.CancelledError:
        if not state["fired"]:
            raise
        task.uncancel()
        return _ABORTED
    finally:
        state["active"] = False
        waiting.cancel()
    if state["fired"]:
        # the cancel landed after the event did: absorb it here, where it is expected
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0)
        task.uncancel()
        return _ABORTED
    return first
