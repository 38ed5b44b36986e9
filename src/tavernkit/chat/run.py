"""Step 5 of a chat turn: send the prepared request through the turn runner.

A chat-family connection goes through :func:`~tavernkit.generation.turn.run_turn` with a plan
of one entry (the resolved profile; fallback chains and key pools plug in here when the chat
service learns to build them). The turn runner takes chat prompts only, so a text-completion
connection (one folded prompt string) is sent once through the task dispatcher with its events
forwarded to the same sink, and its outcome shaped as the same :class:`TurnResult`.
"""

from __future__ import annotations

from typing import cast

from tavernkit.errors import GenerateTaskError
from tavernkit.generation._dispatch import send
from tavernkit.generation.abort import AbortSignal
from tavernkit.generation.adapt import TurnPrompt
from tavernkit.generation.options import TurnOptions
from tavernkit.generation.plan import (
    AttemptTarget,
    FundingScope,
    Plan,
    PlanEntry,
    TurnContext,
)
from tavernkit.generation.profiles import ResolvedConnection
from tavernkit.generation.result import TurnError, TurnResult, classify_error
from tavernkit.generation.sink import ErrorEvent, ResponseSink
from tavernkit.generation.turn import run_turn
from tavernkit.providers.events import ReasoningDelta, StreamEvent, TextDelta
from tavernkit.providers.provider import Provider
from tavernkit.providers.request import ChatPrompt, PromptRequest, TextPrompt

__all__ = ["plan_for", "run_request"]


def plan_for(connection: ResolvedConnection, *, owner: str, kind: str) -> Plan:
    """A one-entry plan for ``connection`` (its provider already holds its key)."""
    entry = PlanEntry(
        model=connection.model or "", provider=connection.source, label=connection.profile.name
    )

    async def resolver(_entry: PlanEntry, _scope: FundingScope) -> AttemptTarget:
        # The embedded model is not an HTTP Provider but streams the same events.
        provider = cast(Provider, connection.provider)
        return AttemptTarget(
            make_provider=lambda _secret: provider, profile=connection.model_profile
        )

    return Plan(
        [entry],
        resolver=resolver,
        scope=FundingScope("user", owner),
        context=TurnContext(
            user_id=owner, impersonation=kind == "impersonate", quiet=kind == "quiet"
        ),
    )


async def run_request(
    connection: ResolvedConnection,
    request: PromptRequest,
    sink: ResponseSink,
    *,
    owner: str,
    kind: str,
    prefill: str = "",
    stream: bool = True,
    abort: AbortSignal | None = None,
    char_name: str = "",
    user_names: tuple[str, ...] = (),
) -> TurnResult:
    """Run one reply to ``sink``; provider failures end in a failed result, never raise."""
    if isinstance(request, ChatPrompt):
        options = TurnOptions(stream=stream, char_name=char_name, user_names=user_names)
        return await run_turn(
            plan_for(connection, owner=owner, kind=kind),
            TurnPrompt.from_chat_prompt(request, prefill=prefill),
            sink,
            options=options,
            abort=abort,
        )
    return await _run_text(connection, request, sink, prefill=prefill, stream=stream, abort=abort)


async def _run_text(
    connection: ResolvedConnection,
    request: PromptRequest,
    sink: ResponseSink,
    *,
    prefill: str,
    stream: bool,
    abort: AbortSignal | None,
) -> TurnResult:
    if prefill and isinstance(request, TextPrompt):
        # A text prompt ends where the reply starts: the prefill is simply its tail.
        request = TextPrompt(
            request.prompt + prefill,
            sampling=request.sampling,
            stop=request.stop,
            response_format=request.response_format,
            grammar=request.grammar,
        )
        await sink.emit(TextDelta(prefill))
    delivered: list[str] = [prefill] if prefill else []
    reasoning: list[str] = []

    async def on_event(event: StreamEvent) -> None:
        if isinstance(event, TextDelta) and event.text:
            delivered.append(event.text)
            await sink.emit(event)
        elif isinstance(event, ReasoningDelta) and event.text:
            reasoning.append(event.text)
            await sink.emit(event)

    result: TurnResult
    try:
        try:
            completion = await send(
                connection, request, stream=stream, abort=abort, on_event=on_event
            )
        except GenerateTaskError as exc:
            text = "".join(delivered)
            if exc.code == "aborted":
                result = TurnResult("aborted", text, model=connection.model)
            else:
                cause: BaseException = exc.__cause__ or exc
                cls, code = classify_error(cause)
                error = TurnError(cls, code, connection.model, cause=exc, reported=True)
                await sink.emit(ErrorEvent(error))
                result = TurnResult("failed", text, model=connection.model, error=error)
        else:
            text = "".join(delivered)
            if len(delivered) == (1 if prefill else 0) and completion.text:
                # a backend that answered in one piece: deliver it now
                await sink.emit(TextDelta(completion.text))
                text += completion.text
            result = TurnResult(
                "completed",
                text,
                reasoning=completion.reasoning or "".join(reasoning),
                model=completion.model or connection.model,
                finish_reason=completion.finish_reason,
                usage=completion.usage,
            )
        await sink.finalize(result)
        return result
    finally:
        await sink.cleanup()
