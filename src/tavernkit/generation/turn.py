"""The turn runner: one reply, executed as a plan of attempts.

:func:`run_turn` walks the plan: for each attempt (model x credential source) it rotates keys
inside the model, then falls back to the next model, then (for personal turns) to the deferred
route. When an attempt dies after part of the reply was delivered, the next one continues
from the delivered text instead of regenerating it (:mod:`~tavernkit.generation.continuation`).

Rules that are easy to get wrong:

- text is shown as it arrives; errors are suppressed while another key or attempt remains,
  and a suppressed error takes back the unfinished clause (a withdrawal: the continuation
  writes it again, so it is shown once), a visible one keeps it;
- timeouts never rotate keys and never count as a key's success; after one the runner waits a
  bounded settle time for sends already under way;
- when every attempt fails only the terminal error is emitted, once, and the result still
  carries everything delivered (the store keeps what the user saw);
- reasoning and usage of failed attempts are not merged into the final message; their usage
  is in the attempts log, with who paid;
- a tool call that already succeeded in an earlier attempt of the turn (same identity: name
  and canonical arguments) is answered from the record, not run again; within one attempt a
  tool may run twice on purpose. Failover never rolls back tool side effects;
- a round that ran a stealth tool is the last one: no follow-up generation, the text so far
  is the reply (possibly empty), as in SillyTavern;
- logs carry outcomes, attempt ids, key ids and budgets, never prompts, drafts or keys.

Both prompt families run here: a chat prompt
(:class:`~tavernkit.generation.attempt.chat_prompt.TurnPrompt`) and a text-completion prompt
(:class:`~tavernkit.generation.attempt.text_prompt.TextTurnPrompt`, where a
prefill or carried text is simply the prompt's tail). Text models have no native tools and no
reviewer call shape, so a text turn runs neither. Every request goes through
:class:`~tavernkit.generation.attempt.sending.SendingProvider` (``before_request`` hooks, the
provider's same-request retry policy, abort before the first event, observation). Tool calls
the model makes when the turn has no tools of its own to run (a task that returns them to its
caller) complete the attempt as they are.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Literal

from tavernkit.errors import ContextTooLong, ProviderError, SecretKeyError
from tavernkit.generation.attempt.chat_prompt import ByteEstimate, TokenCounter, TurnPrompt
from tavernkit.generation.attempt.log import Outcome, attempt_record
from tavernkit.generation.attempt.sending import sending_provider
from tavernkit.generation.attempt.steps import Generation, ReplySteps
from tavernkit.generation.attempt.text_prompt import RoundParts, TextTurnPrompt, attempt_request
from tavernkit.generation.continuation import (
    PrefillPlan,
    SpeakerGuard,
    TextPipe,
    plan_prefill,
)
from tavernkit.generation.delivery import Delivery
from tavernkit.generation.keys import PoolKey, rotates_key
from tavernkit.generation.options import DEFAULT_TOOLS_RAN_DIRECTIVE, TurnOptions
from tavernkit.generation.plan import Attempt, Plan
from tavernkit.generation.result import (
    AttemptRecord,
    FallbackNotice,
    NoticeFailure,
    TurnCounters,
    TurnError,
    TurnFailure,
    TurnResult,
    add_usage,
    classify_error,
    root_cause,
)
from tavernkit.generation.review import (
    ReviewConfig,
    ReviewState,
)
from tavernkit.generation.sink import ErrorEvent, NoticeEvent, ResponseSink
from tavernkit.generation.tool_replay import ToolReplay
from tavernkit.providers.accumulator import Completion
from tavernkit.providers.events import TextDelta
from tavernkit.providers.http import AbortLike
from tavernkit.providers.provider import Provider
from tavernkit.providers.request import ChatMessage, ChatPrompt, TextPrompt
from tavernkit.tools.registry import FunctionTool

__all__ = ["DEFAULT_TOOLS_RAN_DIRECTIVE", "TurnOptions", "run_turn"]

log = logging.getLogger("tavernkit.generation.turn")

Sleep = Callable[[float], Awaitable[object]]


class _Turn(ReplySteps):
    def __init__(
        self,
        plan: Plan,
        request: TurnPrompt | TextTurnPrompt,
        sink: ResponseSink,
        *,
        clock: Callable[[], float],
        sleep: Sleep,
        options: TurnOptions,
        tokenizer: TokenCounter,
        abort: AbortLike | None,
    ) -> None:
        self.plan = plan
        self.request = request
        self.sink = sink
        self.clock = clock
        self.sleep = sleep
        self.options = options
        self.tokenizer = tokenizer
        self.abort = abort
        self.delivery = Delivery(sink)
        self.carried = ""
        self.log: list[AttemptRecord] = []
        self.failures: list[NoticeFailure] = []
        self.shared_history: list[ChatMessage] = []
        self.counters = TurnCounters()
        # per source the prompt was shaped for: a block index means one message of one shape
        self.shaped: dict[str, tuple[TurnPrompt | TextTurnPrompt, dict[int, int]]] = {}
        self.guard = SpeakerGuard(options.user_names)
        self.last_error: BaseException | None = None
        self.last_model: str | None = None
        self.seq = 0
        self.text_mode = isinstance(request, TextTurnPrompt)
        tools = options.tools if not self.text_mode else ()
        self.tools: dict[str, FunctionTool] = (
            dict(tools) if isinstance(tools, Mapping) else {t.name: t for t in tools}
        )
        review = options.review
        self.review: ReviewConfig | None = (
            review
            if review is not None
            and not self.text_mode
            and review.enabled
            and not plan.context.impersonation
            and not plan.context.quiet
            else None
        )
        self.review_state = ReviewState()
        checkpoint = self.review.tool_checkpoint if self.review is not None else None
        if self.review is not None and not self.review.selection.tools:
            checkpoint = None
        self.replay = ToolReplay(
            self.tools,
            timeout=options.tool_timeout,
            abort=abort,
            emit=lambda event: self.delivery.send(self.seq - 1, event),
            checkpoint=checkpoint,
            rejections=self.review_state.rejections,
        )

    def aborted(self) -> bool:
        return self.abort is not None and self.abort.is_set()

    # -- the plan ----------------------------------------------------------------------------

    async def run(self) -> TurnResult:
        async for attempt in self.plan.attempts():
            if self.aborted():
                break
            if attempt.index > 0:
                self.counters.fallbacks += 1
            outcome = await self._attempt(attempt)
            if outcome.aborted or self.aborted():
                return await self._finish("aborted", attempt, outcome)
            if outcome.ok:
                return await self._finish("completed", attempt, outcome)
            assert outcome.error is not None
            cls, code = classify_error(outcome.error)
            shown = self.plan.shown_model(attempt)
            self.failures.append(NoticeFailure(attempt.index, shown, cls, code))
        if self.aborted():
            return await self._finish("aborted", None, Outcome(False, aborted=True))
        return await self._finish("failed", None, Outcome(False, self.last_error))

    async def _attempt(self, attempt: Attempt) -> Outcome:
        """One model attempt: its key loop (at most ``max_key_attempts`` keys)."""
        pool = attempt.target.pool
        tried: set[str] = set()
        outcome: Outcome | None = None
        for n in range(max(self.plan.max_key_attempts, 1)):
            key: PoolKey | None = None
            if pool is not None:
                key = await pool.select(tried)
                if key is None:
                    if outcome is not None:
                        return outcome
                    error = TurnFailure(
                        "keys_cooling",
                        "every key of this provider is cooling down",
                        retry_after=await pool.next_ready_in(),
                        provider=attempt.entry.provider,
                        model=attempt.entry.model,
                    )
                    self._record(
                        attempt, None, Outcome(False, error), 0.0, PrefillPlan("none", "none")
                    )
                    if self.last_error is None:
                        # "all keys cooling" is the turn's error only when no request was
                        # possible at all; otherwise the last real upstream error is the news
                        self.last_error = error
                    return Outcome(False, error)
            more_keys = (
                pool is not None
                and key is not None
                and n + 1 < self.plan.max_key_attempts
                and await pool.available(tried | {key.key_id})
            )
            if n > 0:
                self.counters.rotations += 1
            outcome = await self._key_attempt(
                attempt, key, more_keys or self.plan.has_pending(), rotate=more_keys
            )
            if outcome.ok or outcome.aborted:
                if outcome.ok and pool is not None and key is not None:
                    await pool.record_success(key)
                return outcome
            assert outcome.error is not None
            cls, _ = classify_error(outcome.error)
            if cls == "timeout":
                return outcome  # a slow model is not a bad key: fall back, rotate nothing
            if pool is not None and key is not None:
                await pool.record_failure(key, outcome.error)
            if key is None or not rotates_key(cls):
                return outcome
            tried.add(key.key_id)
        assert outcome is not None
        return outcome

    # -- one key -----------------------------------------------------------------------------

    async def _key_attempt(
        self, attempt: Attempt, key: PoolKey | None, suppress: bool, *, rotate: bool = False
    ) -> Outcome:
        self.counters.attempts += 1
        seq = self.seq
        self.seq += 1
        started = self.clock()
        target = attempt.target
        hold = self.review is not None or not self.options.stream
        if self.carried:
            self.counters.continuations += 1
        prefill = plan_prefill(
            self.carried,
            self.request.prefill,
            # a text model continues its prompt: every prefill is native there
            supports_prefill=self.text_mode or target.profile.supports_prefill,
            config=self.options.continuation,
        )
        outcome = await self._generate(attempt, key, seq, prefill, hold, suppress, rotate)
        if not outcome.ok and not outcome.aborted:
            self.last_error = outcome.error
            self.last_model = self.plan.shown_model(attempt)
        self._record(attempt, key, outcome, self.clock() - started, prefill, seq)
        self.replay.remember(outcome.invocations)
        return outcome

    async def _generate(
        self,
        attempt: Attempt,
        key: PoolKey | None,
        seq: int,
        prefill: PrefillPlan,
        hold: bool,
        suppress: bool,
        rotate: bool = False,
    ) -> Outcome:
        """One attempt: its provider, then request -> stream -> next step, until the reply is
        done or failed. A step may restart the reply (a wrong-speaker start, an empty reply,
        a review revision: a fresh pipe) or run a tool round (same pipe, longer history)."""
        provider = await self._attempt_provider(attempt, key, rotate)
        if isinstance(provider, Outcome):
            return provider

        def new_pipe() -> TextPipe:
            return TextPipe(
                prefill,
                carried=self.carried,
                guard=self.guard,
                segment=self.options.segment,
                hold=hold,
                lead=" \t\n" if self.text_mode else "\n",
                echo=self.options.continues,
            )

        gen = Generation(new_pipe())
        prompt, token_cache = self._shaped_for(attempt.entry.provider)
        while True:
            native, directives, tail = self._round_tail(gen, prefill)
            try:
                parts = RoundParts(
                    tail=tail,
                    after=[*self.shared_history, *gen.history],
                    prefill=native.text() if native is not None else "",
                    directives=directives,
                )
                request = attempt_request(
                    prompt,
                    attempt.target,
                    self.tokenizer,
                    parts,
                    tools_enabled=attempt.target.tools_enabled
                    and gen.rounds < self.options.max_tool_rounds,
                    default_reserve=self.options.default_reserve,
                    token_cache=token_cache,
                )
            except ContextTooLong as exc:
                return Outcome(False, exc, invocations=gen.invocations)
            completion, error = await self.delivery.stream(
                provider.stream(
                    request,
                    model=attempt.entry.model,
                    profile=attempt.target.profile,
                    stream=self.options.stream,
                    abort=self.abort,
                ),
                gen.pipe,
                seq,
            )
            ended = await self._stream_ended(gen, completion, error, seq, suppress)
            if ended is not None:
                return ended
            step = await self._next_step(
                gen, attempt, provider, request, completion, seq, prefill, native
            )
            if isinstance(step, Outcome):
                return step
            if step == "done":
                break
            if step == "restart":
                gen.pipe = new_pipe()
        return await self._completed(gen, completion, seq, hold)

    async def _stream_ended(
        self,
        gen: Generation,
        completion: Completion,
        error: BaseException | None,
        seq: int,
        suppress: bool,
    ) -> Outcome | None:
        """A round's stream read: its usage counted, its reasoning kept; the attempt's
        outcome when the stream was stopped or failed (``None``: go on to the next step)."""
        gen.usage = add_usage(gen.usage, completion.usage)
        if error is None and completion.finish_reason == "aborted":
            return Outcome(False, aborted=True, usage=gen.usage, invocations=gen.invocations)
        if error is not None:
            await self._fail_stream(gen.pipe, seq, error, suppress)
            return gen.failed(error)
        if completion.reasoning:
            gen.reasoning.append(completion.reasoning)
        return None

    async def _completed(
        self, gen: Generation, completion: Completion, seq: int, hold: bool
    ) -> Outcome:
        """The attempt's reply done: what was held back sent, the delivery drained."""
        if hold and gen.pipe.visible:
            self.delivery.send(seq, TextDelta(gen.pipe.visible))
        await self.delivery.drain()
        if self.review is not None:
            self.shared_history += gen.history
        return Outcome(
            True,
            completion=completion,
            reasoning="\n\n".join(gen.reasoning),
            usage=gen.usage,
            invocations=gen.invocations,
        )

    def _shaped_for(self, source: str) -> tuple[TurnPrompt | TextTurnPrompt, dict[int, int]]:
        """The turn's prompt post-processed for ``source`` (made once per source, from the
        blocks) and its token counts."""
        shaped = self.shaped.get(source)
        if shaped is None:
            request = self.request
            prompt = request.for_source(source) if isinstance(request, TurnPrompt) else request
            shaped = self.shaped[source] = (prompt, {})
        return shaped

    async def _attempt_provider(
        self, attempt: Attempt, key: PoolKey | None, rotate: bool
    ) -> Provider | Outcome:
        """The attempt's provider (its key's secret loaded, wrapped by the sending rules), or
        the failed outcome of a credential that cannot be used."""
        target = attempt.target
        options = self.options
        if rotate and options.retry is not None and options.retry.rate_limits:
            # another key is ready: a rate limit moves to it instead of waiting on this one
            options = replace(options, retry=replace(options.retry, rate_limits=False))
        try:
            secret = await target.pool.secret(key) if target.pool is not None and key else None
            return sending_provider(target.make_provider(secret), options, self.abort, self.sleep)
        except ProviderError as exc:
            return Outcome(False, exc)
        except SecretKeyError as exc:  # its message is safe to show and says what to fix
            return Outcome(False, TurnFailure("no_credentials", str(exc)))
        except Exception as exc:  # a loader failure: this credential cannot be used
            return Outcome(False, TurnFailure("no_credentials", type(exc).__name__))

    # -- bookkeeping -------------------------------------------------------------------------

    def _record(
        self,
        attempt: Attempt,
        key: PoolKey | None,
        outcome: Outcome,
        duration: float,
        prefill: PrefillPlan,
        seq: int | None = None,
    ) -> None:
        delivered = len(self.delivery.delivered(seq)) if seq is not None else 0
        record = attempt_record(
            attempt, key, outcome, duration=duration, prefill=prefill, delivered_chars=delivered
        )
        self.log.append(record)
        if not log.isEnabledFor(logging.INFO):
            return  # the message's arguments cost more than the check, per attempt
        cls, code = record.error_class, record.safe_code
        log.info(
            "turn %s attempt %d (%s) key=%s -> %s%s carried=%d",
            self.options.turn_id,
            attempt.index,
            attempt.label,
            record.key_id or "-",
            record.outcome,
            f" {cls} ({code})" if cls else "",
            len(self.carried),
        )

    async def _finish(
        self,
        status: Literal["completed", "failed", "aborted"],
        attempt: Attempt | None,
        outcome: Outcome,
    ) -> TurnResult:
        notice = None
        error = None
        if status == "completed" and attempt is not None and attempt.index > 0:
            notice = FallbackNotice(
                self.plan.shown_model(attempt),
                attempt.index,
                tuple(self.failures),
                route=self.plan.hides(attempt),
            )
            self.delivery.send(-1, NoticeEvent(notice))
        elif status == "failed":
            cause = outcome.error or TurnFailure("no_credentials", "no usable attempt in the plan")
            cls, code = classify_error(cause)
            retry_after = getattr(root_cause(cause), "retry_after", None)
            error = TurnError(cls, code, self.last_model, retry_after, cause, reported=True)
            self.delivery.send(-1, ErrorEvent(error))
        await self.delivery.drain()
        if status != "completed":
            await self.sink.flush()
        self.log += [skip.record() for skip in self.plan.skipped]
        self.log.sort(key=lambda r: r.index)
        completion = outcome.completion
        if completion is not None and attempt is not None and self.plan.hides(attempt):
            # the route's own model name stays out of what the caller shows and stores
            completion = replace(completion, model=self.plan.shown_model(attempt))
        if log.isEnabledFor(logging.INFO):
            log.info(
                "turn %s %s: attempts=%d rotations=%d fallbacks=%d continuations=%d",
                self.options.turn_id,
                status,
                self.counters.attempts,
                self.counters.rotations,
                self.counters.fallbacks,
                self.counters.continuations,
            )
        return TurnResult(
            status=status,
            text=self.delivery.text,
            reasoning=outcome.reasoning if status == "completed" else "",
            model=(completion.model or attempt.entry.model)
            if completion is not None and attempt is not None
            else None,
            attempt_index=attempt.index if attempt is not None else None,
            finish_reason=completion.finish_reason if completion is not None else None,
            usage=outcome.usage if status == "completed" else None,
            tool_invocations=tuple(outcome.invocations),
            attempts=self.log,
            notice=notice,
            error=error,
            counters=replace(self.counters, replayed_tools=self.replay.replayed),
            review=tuple(self.review_state.trace),
            completion=completion,
        )


async def run_turn(
    plan: Plan,
    request: TurnPrompt | ChatPrompt | TextTurnPrompt | TextPrompt,
    sink: ResponseSink,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Sleep = asyncio.sleep,
    options: TurnOptions | None = None,
    tokenizer: TokenCounter | None = None,
    abort: AbortLike | None = None,
) -> TurnResult:
    """Run one reply through ``plan``, emitting to ``sink``; see the module docstring.

    Provider failures never raise: they end in a ``failed`` result carrying the delivered
    text and a safe :class:`~tavernkit.generation.result.TurnError`. An unexpected exception
    is emitted as an ``unknown`` error, the sink is finalized, and the exception propagates.
    ``sink.cleanup()`` always runs; a failure in it is logged, never raised over the turn.

    ``request`` is either family: a provider ``ChatPrompt`` (every non-system message may be
    trimmed, the last user message never) or a ``TurnPrompt`` with explicit blocks; a provider
    ``TextPrompt`` (its last line is the reply opening) or a ``TextTurnPrompt`` with explicit
    droppable pieces.
    """
    prompt: TurnPrompt | TextTurnPrompt
    if isinstance(request, TurnPrompt | TextTurnPrompt):
        prompt = request
    elif isinstance(request, TextPrompt):
        prompt = TextTurnPrompt.from_text_prompt(request)
    else:
        prompt = TurnPrompt.from_chat_prompt(request)
    turn = _Turn(
        plan,
        prompt,
        sink,
        clock=clock,
        sleep=sleep,
        options=options or TurnOptions(),
        tokenizer=tokenizer or ByteEstimate(),
        abort=abort,
    )
    try:
        result = await turn.run()
        await sink.finalize(result)
        return result
    except Exception as exc:
        log.error("turn %s: unexpected %s", turn.options.turn_id, type(exc).__name__)
        error = TurnError("unknown", "unknown", turn.last_model, cause=exc, reported=True)
        failed = TurnResult(
            "failed", turn.delivery.text, error=error, attempts=turn.log, counters=turn.counters
        )
        try:
            await sink.emit(ErrorEvent(error))
            await sink.finalize(failed)
        except Exception:
            log.warning("turn %s: the sink failed while reporting", turn.options.turn_id)
        raise
    finally:
        await turn.delivery.close()
        try:
            await sink.cleanup()
        except Exception as exc:
            log.warning(
                "turn %s: sink cleanup failed (%s)", turn.options.turn_id, type(exc).__name__
            )
