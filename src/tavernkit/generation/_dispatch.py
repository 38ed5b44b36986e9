"""The former private send path, kept as a name for callers not yet moved.

Every request now goes through the turn runner (:func:`tavernkit.generation.one_attempt.send_one`
for a single request, :func:`tavernkit.generation.turn.run_turn` for a turn); :func:`send` is
``send_one`` with its old signature. New code calls those directly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tavernkit.generation.abort import AbortSignal
from tavernkit.generation.one_attempt import send_one
from tavernkit.generation.profiles import ResolvedConnection
from tavernkit.generation.sending import BeforeRequest
from tavernkit.providers.accumulator import Completion
from tavernkit.providers.events import StreamEvent
from tavernkit.providers.request import PromptRequest
from tavernkit.providers.retry import RetryPolicy

__all__ = ["BeforeRequest", "OnEvent", "send"]

OnEvent = Callable[[StreamEvent], Awaitable[None]]


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
    """Send ``request`` once and return the accumulated completion (raises
    :class:`~tavernkit.errors.GenerateTaskError`)."""
    return await send_one(
        connection,
        request,
        stream=stream,
        abort=abort,
        on_event=on_event,
        retry=retry,
        before_request=before_request,
    )
