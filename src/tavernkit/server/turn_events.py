"""What a server turn puts in its event log: :class:`EventLogSink` (and a group member's
:class:`MemberSink`) append a reply's sink events as log entries (:func:`sink_event_entry`)
through the turn's :class:`~tavernkit.server.turn_log_writer.TurnLogWriter`; a turn ends with
:func:`failure_events` or a ``done`` of :func:`outcome_data`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tavernkit.chat.group_turn import GroupTurnOutcome
from tavernkit.chat.reply import TurnOutcome
from tavernkit.errors import (
    CoordinationError,
    EgressRefused,
    GenerateTaskError,
    StoreUnavailable,
)
from tavernkit.generation.result import TurnResult
from tavernkit.generation.sink import (
    ErrorEvent,
    NoticeEvent,
    SinkEvent,
    ToolEvent,
    WithdrawEvent,
)
from tavernkit.providers.events import ReasoningDelta, TextDelta
from tavernkit.server.coordination import TurnEventLog
from tavernkit.server.metrics import PieceTimer
from tavernkit.server.task_errors import safe_text
from tavernkit.server.turn_log_writer import PIECE_TYPES, TurnLogWriter

__all__ = [
    "EventLogSink",
    "MemberSink",
    "failure_events",
    "outcome_data",
    "sink_event_entry",
    "turn_error_data",
]


class EventLogSink:
    """A :class:`~tavernkit.generation.sink.ResponseSink` that appends a turn's events to its
    log, one log event per sink event (empty deltas are dropped), through the turn's
    :class:`TurnLogWriter`. When the writer appends without waiting (the in-memory log in
    place, the Redis log batched) it offers ``emit_nowait``, so the turn runner hands it each
    piece in place, with no queue or task between them."""

    def __init__(self, log: TurnEventLog, turn_id: str, writer: TurnLogWriter | None = None):
        self.log = log
        self.turn_id = turn_id
        self.writer = writer or TurnLogWriter(log, turn_id)
        #: times the turn's pieces for the server's metrics (``None``: not measured)
        self.timer: PieceTimer | None = None

    async def emit(self, event: SinkEvent) -> None:
        entry = sink_event_entry(event)
        if entry is not None:
            self._time(entry[0])
            await self.writer.append(*entry)

    @property
    def emit_nowait(self) -> Callable[[SinkEvent], None] | None:
        return self._emit_now if self.writer.in_place else None

    def _emit_now(self, event: SinkEvent) -> None:
        entry = sink_event_entry(event)
        if entry is not None:
            self._time(entry[0])
            self.writer.append_nowait(*entry)

    def _time(self, entry_type: str) -> None:
        if self.timer is not None and entry_type in PIECE_TYPES:
            self.timer.piece()

    async def flush(self) -> None:
        return None

    async def finalize(self, result: TurnResult) -> None:
        return None

    async def cleanup(self) -> None:
        return None


def sink_event_entry(event: SinkEvent) -> tuple[str, dict[str, Any]] | None:
    """The log's (type, data) of one sink event; ``None`` for one with nothing to show."""
    if isinstance(event, TextDelta):
        return ("text", {"text": event.text}) if event.text else None
    if isinstance(event, ReasoningDelta):
        return ("reasoning", {"text": event.text}) if event.text else None
    if isinstance(event, WithdrawEvent):
        # the end of the text shown so far is taken back (``text`` is exactly that end)
        return ("withdraw", {"text": event.text}) if event.text else None
    if isinstance(event, ToolEvent):
        return "tool", {
            "name": event.name,
            "display": event.display,
            "replayed": event.replayed,
            "error": event.error,
        }
    if isinstance(event, NoticeEvent):
        return "notice", {"kind": "fallback", "text": event.notice.text(), **event.notice.to_json()}
    if isinstance(event, ErrorEvent):
        cause = event.error.cause
        if isinstance(cause, StoreUnavailable | CoordinationError):
            # an outage, not an unknown failure (its own message names the server's address)
            return "error", turn_error_data(
                type(cause).__name__,
                "unavailable",
                "the server could not reach its database or shared state; try again",
            )
        # the policy's refusal is the server's own words; an upstream's never are shown
        said = str(cause) if isinstance(cause, EgressRefused) else None
        return "error", turn_error_data(event.error.error_class, event.error.code, said)
    return None


def turn_error_data(error_class: str, code: str, message: str | None = None) -> dict[str, Any]:
    return {
        "class": error_class,
        "code": code,
        "message": message or f"Generation failed: {error_class} ({code})",
    }


class MemberSink(EventLogSink):
    """A group member's part of a group turn's log: a ``notice`` with ``kind: "member"``
    (its name and avatar) before the member's first event, then its events."""

    def __init__(
        self,
        log: TurnEventLog,
        turn_id: str,
        name: str,
        avatar: str,
        writer: TurnLogWriter | None = None,
    ) -> None:
        super().__init__(log, turn_id, writer)
        self.name = name
        self.avatar = avatar
        self._announced = False

    async def emit(self, event: SinkEvent) -> None:
        if not self._announced and sink_event_entry(event) is not None:
            self._announced = True
            await self.writer.append("notice", self._announcement())
        await super().emit(event)

    def _emit_now(self, event: SinkEvent) -> None:
        if not self._announced and sink_event_entry(event) is not None:
            self._announced = True
            self.writer.append_nowait("notice", self._announcement())
        super()._emit_now(event)

    def _announcement(self) -> dict[str, Any]:
        return {"kind": "member", "name": self.name, "avatar": self.avatar}


def failure_events(
    exc: Exception, *, safe: bool = True, shown: bool = False
) -> list[tuple[str, dict[str, Any]]]:
    """The ``error`` and ``done`` events a failed turn ends with (a bug's message stays in
    the server log); ``shown``: the turn logged its ``error`` already (the runner reported
    it), so only ``done`` follows."""
    code: str
    if isinstance(exc, GenerateTaskError):
        code = exc.code
    elif isinstance(exc, StoreUnavailable | CoordinationError):
        code = "unavailable"
    else:
        code = "unknown"
    message = safe_text(exc) if safe else "the turn failed (see the server log)"
    done = ("done", {"status": "failed", "error": {"class": type(exc).__name__, "code": code}})
    if shown:
        return [done]
    return [("error", turn_error_data(type(exc).__name__, code, message)), done]


def outcome_data(outcome: TurnOutcome | GroupTurnOutcome) -> dict[str, Any]:
    """The ``done`` event of a turn that ran (its stored place; the text is in the log); a
    group turn's lists each member's reply in order, under ``replies``."""
    if isinstance(outcome, GroupTurnOutcome):
        return {
            "status": outcome.status,
            "kind": outcome.kind,
            "user_message_stored": outcome.user_message_stored,
            "replies": [
                {"name": r.name, "avatar": r.avatar, **outcome_data(r.outcome)}
                for r in outcome.replies
            ],
        }
    return {
        "status": outcome.status,
        "kind": outcome.kind,
        "message_index": outcome.message_index,
        "swipe_index": outcome.swipe_index,
        "model": outcome.model,
        "error": None
        if outcome.error is None
        else {"class": outcome.error.error_class, "code": outcome.error.code},
    }
