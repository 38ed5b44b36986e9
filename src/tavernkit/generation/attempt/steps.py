"""What an attempt of a turn does after a reply streamed, and what its requests end with.

A reply may be restarted (it began as the user: once, with the speaker directive; it was
empty: once, on the same key; a review asked for a revision), run a tool round (its calls run
through the turn's :class:`~tavernkit.generation.tool_replay.ToolReplay`, their results extend
the history for the next request; a stealth tool ends the loop), fail, or be done. These are
the steps of the turn runner (:mod:`tavernkit.generation.turn`), which mixes
:class:`ReplySteps` in; the plan, key and attempt loops stay there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from tavernkit.generation.attempt.log import Outcome
from tavernkit.generation.attempt.sending import Sleep
from tavernkit.generation.continuation import PrefillPlan, TextPipe, fill, tail_directive
from tavernkit.generation.delivery import Delivery
from tavernkit.generation.options import TurnOptions
from tavernkit.generation.plan import Attempt, Plan, PlanEntry
from tavernkit.generation.result import TurnCounters, TurnFailure, classify_error
from tavernkit.generation.review import (
    ReviewConfig,
    ReviewerContext,
    ReviewState,
    pinned_reviewer,
    review_candidate,
    review_unavailable,
    revision_directive,
)
from tavernkit.generation.sink import ResponseSink
from tavernkit.generation.tool_replay import ToolReplay
from tavernkit.providers.accumulator import Completion, WireToolCall
from tavernkit.providers.events import TextDelta, Usage
from tavernkit.providers.http import AbortLike
from tavernkit.providers.provider import Provider
from tavernkit.providers.request import ChatMessage, ChatPrompt, TextPrompt
from tavernkit.tools.loop import InvocationRecord
from tavernkit.tools.registry import FunctionTool

__all__ = ["Generation", "ReplySteps", "Step"]


#: what an attempt does after a reply streamed: ``restart`` the reply (fresh pipe), ``more``
#: (a tool round ran: request again) or ``done``
Step = Literal["restart", "more", "done"]


@dataclass
class Generation:
    """One attempt's generation across its restarts and tool rounds."""

    pipe: TextPipe
    history: list[ChatMessage] = field(default_factory=list)
    invocations: list[InvocationRecord] = field(default_factory=list)
    usage: Usage | None = None
    reasoning: list[str] = field(default_factory=list)
    #: directives a restart adds (the speaker rule, a review's revision)
    extra: list[str] = field(default_factory=list)
    retried_empty: bool = False
    retried_speaker: bool = False
    rounds: int = 0

    def failed(self, error: BaseException) -> Outcome:
        return Outcome(False, error, usage=self.usage, invocations=self.invocations)


class ReplySteps:
    """The reply steps of a turn (mixed into the runner's turn, whose state they read)."""

    plan: Plan
    sink: ResponseSink
    sleep: Sleep
    options: TurnOptions
    abort: AbortLike | None
    delivery: Delivery
    carried: str
    counters: TurnCounters
    tools: dict[str, FunctionTool]
    review: ReviewConfig | None
    review_state: ReviewState
    replay: ToolReplay

    def _directives(self, extra: Sequence[str], first_round: bool) -> list[str]:
        out = []
        if self.replay.completed and self.review is None and first_round:
            out.append(fill(self.options.tools_ran_directive, tools=self.replay.summary()))
        return out + list(extra)

    def _round_tail(
        self, gen: Generation, prefill: PrefillPlan
    ) -> tuple[ChatMessage | None, list[str], list[ChatMessage]]:
        """What this request ends with: the directives (tools ran, a restart's instruction,
        a directive prefill on the first request) and a native prefill (first request only).
        Returns ``(native prefill, directives, tail)``."""
        first = not gen.history
        directives = self._directives(gen.extra, first)
        native = prefill.message if prefill.mode == "native" and first else None
        if prefill.mode == "directive" and first:
            directives.append(prefill.directive)
        tail: list[ChatMessage] = []
        if directives:
            tail.append(tail_directive(*directives))
        if native is not None:
            tail.append(native)
        return native, directives, tail

    async def _next_step(
        self,
        gen: Generation,
        attempt: Attempt,
        provider: Provider,
        request: ChatPrompt | TextPrompt,
        completion: Completion,
        seq: int,
        prefill: PrefillPlan,
        native: ChatMessage | None,
    ) -> Step | Outcome:
        """After a reply streamed: restart it (wrong speaker, empty, revised), run a tool
        round, end the attempt as failed, or be done."""
        pipe = gen.pipe
        rest = pipe.finish()
        self.delivery.take_back(seq, pipe)
        if pipe.wrong_speaker:
            return self._speaker_restart(gen)
        if rest:
            self.delivery.send(seq, TextDelta(rest))
        if completion.tool_calls and not self.tools:
            return "done"  # calls the turn has no tools to run are the caller's: done
        calls = completion.tool_calls if self.tools and not pipe.cut else []
        if calls and gen.rounds < self.options.max_tool_rounds:
            return await self._tool_round(gen, completion, calls, prefill, native)
        if not pipe.visible.strip():
            return self._empty_reply(gen, completion)
        if self.review is not None and not self.review_state.ended:
            assert isinstance(request, ChatPrompt)
            revise = await self._review(attempt, provider, request, pipe, gen.invocations)
            if revise is not None:
                gen.history += [ChatMessage("assistant", pipe.visible)]
                gen.extra = [revise]
                return "restart"
        return "done"

    def _speaker_restart(self, gen: Generation) -> Step | Outcome:
        """The reply started as the user: once, restart it with the speaker directive."""
        if gen.retried_speaker:
            return gen.failed(TurnFailure("speaker_guard", "reply started as the wrong speaker"))
        gen.retried_speaker = True
        user = self.options.user_names[0] if self.options.user_names else "the user"
        char = self.options.char_name or "your character"
        gen.extra.append(fill(self.options.continuation.speaker_directive, char=char, user=user))
        return "restart"

    async def _tool_round(
        self,
        gen: Generation,
        completion: Completion,
        calls: Sequence[WireToolCall],
        prefill: PrefillPlan,
        native: ChatMessage | None,
    ) -> Step:
        """Run the reply's tool calls; their results extend the history for the next
        request (a stealth tool ends the loop: no follow-up generation, as in SillyTavern)."""
        gen.rounds += 1
        head = prefill.text if native is not None and gen.rounds == 1 else ""
        gen.history.append(
            ChatMessage("assistant", head + completion.text, tool_calls=tuple(calls))
        )
        records = await self.replay.run_round(calls, gen.rounds)
        gen.invocations += records
        if any(r.stealth for r in records):
            return "done"
        gen.history += [ChatMessage("tool", r.result, tool_call_id=r.id) for r in records]
        return "more"

    def _empty_reply(self, gen: Generation, completion: Completion) -> Step | Outcome:
        """A reply with nothing visible: a cap's cut fails, carried text is the whole reply,
        else one retry on the same key, then the failure."""
        if completion.finish_reason == "length":
            return gen.failed(
                TurnFailure("length_cap", "the output-token cap ended an empty reply")
            )
        if self.carried:
            return "done"  # the carried text was the whole reply
        if not gen.retried_empty:
            gen.retried_empty = True
            return "restart"
        return gen.failed(TurnFailure("empty_response", "the model returned an empty reply"))

    async def _fail_stream(
        self, pipe: TextPipe, seq: int, error: BaseException, suppress: bool
    ) -> None:
        """What a failed attempt leaves: delivered text becomes carried text."""
        timeout = classify_error(error)[0] == "timeout"
        settle = self.options.continuation.settle_seconds
        await self.delivery.give_up(
            pipe, seq, visible=not suppress, settle=settle if timeout else None, sleep=self.sleep
        )
        if not suppress:
            await self.sink.flush()
        # what landed, up to its last clause: after a timeout a send may have landed past
        # the clause the withdrawal was measured from (it is taken back all the same)
        self.carried += pipe.buffer.stood_by(self.delivery.delivered(seq))

    # -- review ------------------------------------------------------------------------------

    async def _review(
        self,
        attempt: Attempt,
        provider: Provider,
        request: ChatPrompt,
        pipe: TextPipe,
        invocations: Sequence[InvocationRecord],
    ) -> str | None:
        """Review the held candidate; the revision directive when the author must revise."""
        review, state = self.review, self.review_state
        assert review is not None
        self.counters.reviews += 1
        max_tokens = request.sampling.max_tokens
        if isinstance(review.reviewer, PlanEntry):
            ctx = await pinned_reviewer(
                self.plan, review.reviewer, attempt.scope, max_tokens=max_tokens, abort=self.abort
            )
            if ctx is None:
                review_unavailable(state, "pinned_reviewer_unusable")
                return None
        else:

            async def admit() -> bool:
                entry = attempt.entry
                return await self.plan.admit(entry.model, attempt.scope, "review", entry)

            profile = attempt.target.profile
            model = attempt.entry.model
            ctx = ReviewerContext(provider, profile, model, max_tokens, admit, self.abort)
        done = [*self.replay.completed.values(), *invocations]
        outcomes = [(r.name, r.args, r.result) for r in done if not r.error]
        verdict = await review_candidate(state, review, pipe.visible, ctx, tool_outcomes=outcomes)
        if verdict.result != "revise" or state.revisions >= review.max_revisions:
            return None
        state.revisions += 1
        self.counters.revisions += 1
        return revision_directive(verdict, review)
