"""What one attempt of a turn ended with, and its line in the turn's attempts log.

Kept apart from the runner (:mod:`tavernkit.generation.turn`) so the walk over the plan reads
as the rules it follows, and the log's shape (outcome, who paid, what was carried) has one
place: the log carries outcomes, ids and budgets, never prompts, drafts or keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from tavernkit.generation.continuation import PrefillPlan
from tavernkit.generation.keys import PoolKey
from tavernkit.generation.plan import Attempt
from tavernkit.generation.result import AttemptRecord, classify_error
from tavernkit.providers.accumulator import Completion
from tavernkit.providers.events import Usage
from tavernkit.tools.loop import InvocationRecord

__all__ = ["Outcome", "attempt_record"]


@dataclass
class Outcome:
    """One attempt's end: a reply (``ok``), an abort, or the error that ended it."""

    ok: bool
    error: BaseException | None = None
    aborted: bool = False
    completion: Completion | None = None
    reasoning: str = ""
    usage: Usage | None = None
    invocations: list[InvocationRecord] = field(default_factory=list)


def attempt_record(
    attempt: Attempt,
    key: PoolKey | None,
    outcome: Outcome,
    *,
    duration: float,
    prefill: PrefillPlan,
    delivered_chars: int,
) -> AttemptRecord:
    """The attempts-log line of one key attempt of ``attempt``."""
    cls, code = classify_error(outcome.error) if outcome.error is not None else (None, None)
    result: Literal["completed", "error", "timeout", "aborted"] = (
        "completed"
        if outcome.ok
        else "aborted"
        if outcome.aborted
        else "timeout"
        if cls == "timeout"
        else "error"
    )
    return AttemptRecord(
        index=attempt.index,
        label=attempt.label,
        model=attempt.entry.model,
        provider=attempt.entry.provider,
        source=key.source if key is not None else attempt.entry.effective_source,
        paid_by=attempt.scope.label(),
        outcome=result,
        key_id=key.key_id if key is not None else None,
        error_class=cls,
        safe_code=code,
        usage=outcome.usage,
        delivered_chars=delivered_chars,
        continuation=prefill.source == "carried",
        prefill_mode=prefill.mode,
        duration_s=duration,
    )
