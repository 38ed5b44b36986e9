"""What a turn produces: the attempts log, the fallback notice, the terminal error, the result.

Error classes are the turn runner's vocabulary for policy and for people. A notice or a terminal
error shows only the class and a *safe code* (the HTTP status, or the class itself): provider
messages can echo private prompt text back, so they stay in the operator log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from tavernkit.errors import (
    AuthError,
    BadRequest,
    ContentFiltered,
    ContextTooLong,
    EgressRefused,
    MissingCredential,
    ModelUnavailable,
    NetworkError,
    Overloaded,
    ProtocolError,
    ProviderError,
    ProviderTimeout,
    QuotaExhausted,
    RateLimited,
    StreamInterrupted,
)
from tavernkit.errors import ErrorClass as ErrorClass
from tavernkit.errors import TurnFailure as TurnFailure
from tavernkit.providers.events import Usage

if TYPE_CHECKING:
    from tavernkit.providers.accumulator import Completion
    from tavernkit.tools.loop import InvocationRecord

__all__ = [
    "AttemptRecord",
    "ErrorClass",
    "FallbackNotice",
    "NoticeFailure",
    "TurnCounters",
    "TurnError",
    "TurnFailure",
    "TurnResult",
    "TurnStatus",
    "add_usage",
    "classify_error",
    "root_cause",
]


TurnStatus = Literal["completed", "failed", "aborted"]

# most specific class first: a subclass must come before its base
_CLASSES: tuple[tuple[type[ProviderError], ErrorClass], ...] = (
    (EgressRefused, "egress_refused"),
    (MissingCredential, "missing_credential"),
    (AuthError, "auth"),
    (QuotaExhausted, "quota"),
    (RateLimited, "rate_limit"),
    (Overloaded, "overloaded"),
    (ContextTooLong, "context_too_long"),
    (ContentFiltered, "content_filter"),
    (ModelUnavailable, "model_unavailable"),
    (BadRequest, "bad_request"),
    (ProviderTimeout, "timeout"),
    (NetworkError, "network"),
    (ProtocolError, "protocol"),
)


def root_cause(error: BaseException) -> BaseException:
    """The classified cause of a broken stream (a timeout after text is still a timeout)."""
    if isinstance(error, StreamInterrupted) and error.cause is not None:
        return error.cause
    return error


def classify_error(error: BaseException) -> tuple[ErrorClass, str]:
    """``(error class, safe code)``; the safe code is the HTTP status or the class, never text
    the provider wrote."""
    if isinstance(error, TurnFailure):
        return error.error_class, error.error_class
    cause = root_cause(error)
    status = getattr(cause, "status", None) or getattr(error, "status", None)
    cls: ErrorClass = "unknown"
    if isinstance(cause, TurnFailure):
        cls = cause.error_class
    elif isinstance(cause, StreamInterrupted):
        cls = "interrupted"
    else:
        for klass, name in _CLASSES:
            if isinstance(cause, klass):
                cls = name
                break
    return cls, str(status) if isinstance(status, int) else cls


def add_usage(a: Usage | None, b: Usage | None) -> Usage | None:
    """Usage of two requests of one attempt (tool rounds, revisions) added up."""
    if a is None or b is None:
        return a or b

    def plus(x: int | None, y: int | None) -> int | None:
        return None if x is None and y is None else (x or 0) + (y or 0)

    return Usage(
        input_tokens=plus(a.input_tokens, b.input_tokens),
        output_tokens=plus(a.output_tokens, b.output_tokens),
        total_tokens=plus(a.total_tokens, b.total_tokens),
        cached_input_tokens=plus(a.cached_input_tokens, b.cached_input_tokens),
        cache_write_tokens=plus(a.cache_write_tokens, b.cache_write_tokens),
        reasoning_tokens=plus(a.reasoning_tokens, b.reasoning_tokens),
    )


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One line of the attempts log: what was tried, how it ended, what it cost and who paid.

    ``key_id`` is the store's key id (never the secret); ``paid_by`` is the funding scope.
    """

    index: int
    label: str
    model: str
    provider: str
    source: str
    paid_by: str
    outcome: Literal["completed", "error", "timeout", "skipped", "aborted"]
    key_id: str | None = None
    error_class: ErrorClass | None = None
    safe_code: str | None = None
    usage: Usage | None = None
    delivered_chars: int = 0
    continuation: bool = False
    prefill_mode: str = "none"
    reason: str | None = None
    duration_s: float = 0.0


@dataclass(frozen=True, slots=True)
class NoticeFailure:
    index: int
    model: str
    error_class: ErrorClass
    code: str


@dataclass(frozen=True, slots=True)
class FallbackNotice:
    """Shown (and stored with the message) when a fallback model answered the turn.

    ``route``: ``model`` names a route that keeps its models to itself (a server's shared
    connection, see :class:`~tavernkit.generation.plan.DeferredRoute`), not a model."""

    model: str
    index: int
    failures: tuple[NoticeFailure, ...]
    route: bool = False

    def text(self) -> str:
        what = self.model if self.route else f"fallback model {self.model}"
        lines = [f"Answered by {what} (slot {self.index + 1})."]
        lines += [
            f"{n}. {f.model}: {f.error_class} ({f.code})"
            for n, f in enumerate(self.failures, start=1)
        ]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "index": self.index,
            "failures": [
                {"index": f.index, "model": f.model, "class": f.error_class, "code": f.code}
                for f in self.failures
            ],
        }


@dataclass(frozen=True, slots=True)
class TurnError:
    """The terminal error of a failed turn, in terms safe to show and store.

    ``cause`` is the exception for the operator (never shown: its message may echo prompt
    text); ``reported`` says the sink already showed it, so no caller reports it twice.
    """

    error_class: ErrorClass
    code: str
    model: str | None = None
    retry_after: float | None = None
    cause: BaseException | None = field(default=None, compare=False, repr=False)
    reported: bool = False

    def text(self) -> str:
        where = f" from {self.model}" if self.model else ""
        return f"Generation failed{where}: {self.error_class} ({self.code})"


@dataclass(slots=True)
class TurnCounters:
    attempts: int = 0
    rotations: int = 0
    fallbacks: int = 0
    continuations: int = 0
    reviews: int = 0
    revisions: int = 0
    replayed_tools: int = 0


@dataclass(slots=True)
class TurnResult:
    """The outcome of :func:`~tavernkit.generation.turn.run_turn`.

    ``text`` is everything delivered to the sink, in order, across attempts (carried text
    included), so the stored message is what the user saw even when the turn failed.
    ``reasoning``/``usage``/``model`` are the finishing attempt's only; the usage of failed
    attempts stays in ``attempts`` for cost. ``completion`` is the finishing request's
    accumulated response (its tool calls when the runner did not run them, the raw text).
    """

    status: TurnStatus
    text: str
    reasoning: str = ""
    model: str | None = None
    attempt_index: int | None = None
    finish_reason: str | None = None
    usage: Usage | None = None
    tool_invocations: tuple[InvocationRecord, ...] = ()
    attempts: list[AttemptRecord] = field(default_factory=list)
    notice: FallbackNotice | None = None
    error: TurnError | None = None
    counters: TurnCounters = field(default_factory=TurnCounters)
    review: tuple[Mapping[str, Any], ...] = ()
    completion: Completion | None = None

    @property
    def failure_reported(self) -> bool:
        return self.error is not None and self.error.reported
