"""One request through the turn runner: the one-attempt plan of tasks and the primitives.

``generate_task``, ``generate_raw``, ``generate_quiet_prompt`` and the ``send_*`` primitives
send through :func:`~tavernkit.generation.turn.run_turn` like a chat turn, plus the provider's
retry policy: one code path for hooks, retries, abort, text-family adaptation and error
classes. Their plan is the chat turn's (``plan=``: the profile's key pool with its cooldowns
and its fallback chain, see :func:`tavernkit.chat.plan.task_plan`); without one it is a plan
of one entry, the resolved connection. Continuation is off unless asked for (tool and JSON
replies cannot be stitched together).

:func:`send_one` returns the accumulated :class:`~tavernkit.providers.accumulator.Completion`
or raises :class:`~tavernkit.errors.GenerateTaskError` with the code decided by the error's type
(never by its message); text delivered before a terminal failure is in
``details["delivered_text"]``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import cast

from tavernkit.errors import GenerateTaskError, GenerateTaskErrorCode
from tavernkit.generation.abort import AbortSignal
from tavernkit.generation.attempt.chat_prompt import TurnPrompt
from tavernkit.generation.attempt.sending import BeforeRequest, Observe, Sleep
from tavernkit.generation.attempt.text_prompt import TextTurnPrompt
from tavernkit.generation.continuation import ContinuationConfig
from tavernkit.generation.options import TurnOptions
from tavernkit.generation.plan import AttemptTarget, FundingScope, Plan, PlanEntry, TurnContext
from tavernkit.generation.profiles import ResolvedConnection
from tavernkit.generation.result import TurnFailure, TurnResult
from tavernkit.generation.sink import ResponseSink, SinkEvent
from tavernkit.generation.turn import run_turn
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.providers.accumulator import Completion
from tavernkit.providers.events import StreamEvent, TextDelta
from tavernkit.providers.provider import Provider
from tavernkit.providers.request import PromptRequest, TextPrompt
from tavernkit.providers.retry import RetryPolicy
from tavernkit.task_errors import task_error_from

__all__ = [
    "NullSink",
    "OneRequestOptions",
    "one_attempt_plan",
    "send_one",
    "task_error_for",
    "turn_request",
]

#: the runner's own failure classes, as task codes
_FAILURE_CODES: dict[str, GenerateTaskErrorCode] = {
    "empty_response": "no_response",
    "length_cap": "no_response",
    "speaker_guard": "no_response",
    "keys_cooling": "rate_limit",
    "not_admitted": "rate_limit",
    "no_credentials": "auth_missing",
}


class NullSink:
    """A sink that shows nothing (a non-streaming call reads the result instead)."""

    async def emit(self, event: SinkEvent) -> None:
        return None

    def emit_nowait(self, event: SinkEvent) -> None:
        return None

    async def flush(self) -> None:
        return None

    async def finalize(self, result: TurnResult) -> None:
        return None

    async def cleanup(self) -> None:
        return None


def one_attempt_plan(
    connection: ResolvedConnection,
    *,
    owner: str = DEFAULT_OWNER,
    quiet: bool = True,
    impersonation: bool = False,
) -> Plan:
    """A plan of one entry: ``connection`` (its provider already holds its key)."""
    entry = PlanEntry(
        model=connection.model or "", provider=connection.source, label=connection.profile.name
    )
    # the embedded model is not an HTTP Provider, but it streams the same events
    provider = cast(Provider, connection.provider)

    async def resolver(_entry: PlanEntry, _scope: FundingScope) -> AttemptTarget:
        return AttemptTarget(
            make_provider=lambda _secret: provider, profile=connection.model_profile
        )

    return Plan(
        [entry],
        resolver=resolver,
        scope=FundingScope("user", owner),
        context=TurnContext(user_id=owner, impersonation=impersonation, quiet=quiet),
        max_key_attempts=1,
    )


def turn_request(
    request: PromptRequest, *, prefill: str = "", trim: bool = False
) -> TurnPrompt | TextTurnPrompt:
    """The runner's form of a provider request (``trim=False``: no message may be dropped)."""
    if isinstance(request, TextPrompt):
        return TextTurnPrompt.from_text_prompt(request, prefill=prefill)
    return TurnPrompt.from_chat_prompt(request, prefill=prefill, trim=trim)


def task_error_for(result: TurnResult, delivered: str = "") -> GenerateTaskError:
    """The task error of a failed or aborted turn."""
    text = result.text or delivered
    if result.status == "aborted":
        return GenerateTaskError("aborted", "request aborted", details={"delivered_text": text})
    cause = result.error.cause if result.error is not None else None
    error: GenerateTaskError
    if isinstance(cause, TurnFailure) and cause.error_class in _FAILURE_CODES:
        error = GenerateTaskError(
            _FAILURE_CODES[cause.error_class],
            str(cause),
            cause=cause,
            details={"reason": cause.error_class},
        )
    elif cause is not None:
        error = task_error_from(cause)
    else:
        error = GenerateTaskError("unknown", "the request failed")
    if not error.details.get("delivered_text"):
        error.details["delivered_text"] = text
    return error


@dataclass(frozen=True, slots=True)
class OneRequestOptions:
    """How :func:`send_one` sends, besides the request itself.

    ``on_event`` sees every provider event; ``retry`` retries the same request before its
    first event; ``before_request`` sees (and may replace) the outgoing request;
    ``continuation`` lets a cut stream be continued; ``prefill`` starts the reply (a chat
    model's trailing assistant message, or a text prompt's tail); ``owner`` owns the keys of
    the one-entry plan; ``on_result`` sees the turn's result whatever its status (the main
    chat's ``after_chat_turn`` hooks); ``turn_id`` names the request in the logs.
    """

    on_event: Observe | None = None
    retry: RetryPolicy | None = None
    before_request: BeforeRequest | None = None
    continuation: bool = False
    prefill: str = ""
    owner: str = DEFAULT_OWNER
    sleep: Sleep = asyncio.sleep
    clock: Callable[[], float] | None = None
    turn_id: str = "task"
    on_result: Callable[[TurnResult], object] | None = None


async def send_one(
    connection: ResolvedConnection,
    request: PromptRequest,
    *,
    stream: bool,
    abort: AbortSignal | None = None,
    sink: ResponseSink | None = None,
    plan: Plan | None = None,
    how: OneRequestOptions = OneRequestOptions(),
) -> Completion:
    """Send ``request`` once through the turn runner (see the module docstring).

    ``sink`` gets the visible reply as it is released (deltas, not clauses); ``plan``
    replaces the one-entry plan of ``connection`` (its first entry must be ``connection``: the
    request was built for it); ``how``: the hooks and the rest (:class:`OneRequestOptions`).
    """
    on_event = how.on_event
    if abort is not None and abort.aborted:
        raise GenerateTaskError("aborted", "request aborted", details={"delivered_text": ""})
    raw: list[str] = []

    async def observe(event: StreamEvent) -> None:
        if type(event) is TextDelta:
            raw.append(event.text)
        if on_event is not None:
            result = on_event(event)
            if isinstance(result, Awaitable):
                await result

    options = TurnOptions(
        stream=stream,
        segment="delta",
        continuation=ContinuationConfig(enabled=how.continuation),
        retry=how.retry or RetryPolicy(),
        before_request=how.before_request,
        observe=observe,
        turn_id=how.turn_id,
    )
    try:
        result = await run_turn(
            plan or one_attempt_plan(connection, owner=how.owner),
            turn_request(request, prefill=how.prefill),
            sink or NullSink(),
            clock=how.clock or time.monotonic,
            sleep=how.sleep,
            options=options,
            abort=abort,
        )
    except GenerateTaskError:
        raise
    except Exception as exc:
        error = task_error_from(exc)
        error.details.setdefault("delivered_text", "".join(raw))
        raise error from exc
    if how.on_result is not None:
        how.on_result(result)
    if result.status != "completed":
        raise task_error_for(result, "".join(raw))
    if abort is not None and abort.aborted:
        raise GenerateTaskError(
            "aborted", "request aborted", details={"delivered_text": result.text}
        )
    completion = result.completion
    assert completion is not None
    return completion
