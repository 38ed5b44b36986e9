"""A turn's log sink on the in-memory log takes each piece in place (``emit_nowait``): the
runner's delivery calls it with no queue or task between them; on a log that must be awaited
(Redis) it is queued as before."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tavernkit.chat.sink import TeeSink
from tavernkit.errors import StoreUnavailable
from tavernkit.generation.delivery import Delivery
from tavernkit.generation.result import TurnError
from tavernkit.generation.sink import ErrorEvent, RecordingSink, ToolEvent
from tavernkit.providers.events import ReasoningDelta, TextDelta
from tavernkit.server.coordination_local import InMemoryTurnEventLog
from tavernkit.server.turn_events import EventLogSink, MemberSink


class AwaitedLog:
    """A log with only the protocol's awaited ``append`` (as the Redis one)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Mapping[str, Any]]] = []

    async def append(self, turn_id: str, type: str, data: Mapping[str, Any]) -> str:
        self.events.append((type, data))
        return str(len(self.events))


def logged(log: InMemoryTurnEventLog, turn: str) -> list[tuple[str, str, dict[str, Any]]]:
    return [(e.id, e.type, dict(e.data)) for e in log._log(turn).events]


def test_pieces_go_to_the_in_memory_log_in_place_with_exact_ids() -> None:
    log = InMemoryTurnEventLog()
    sink = EventLogSink(log, "t")
    emit = sink.emit_nowait
    assert emit is not None
    emit(TextDelta("Hel"))
    emit(TextDelta(""))  # nothing to show: no event, no id
    emit(ReasoningDelta("hm"))
    emit(TextDelta("lo"))
    assert logged(log, "t") == [
        ("1", "text", {"text": "Hel"}),
        ("2", "reasoning", {"text": "hm"}),
        ("3", "text", {"text": "lo"}),
    ]


def test_a_log_that_must_be_awaited_is_queued() -> None:
    sink = EventLogSink(AwaitedLog(), "t")  # type: ignore[arg-type]
    assert sink.emit_nowait is None
    assert TeeSink([RecordingSink(), sink]).emit_nowait is None


def test_a_member_is_announced_once_before_its_first_piece() -> None:
    log = InMemoryTurnEventLog()
    emit = MemberSink(log, "t", "Mira", "mira.png").emit_nowait
    assert emit is not None
    emit(TextDelta(""))  # nothing shown yet: no announcement either
    emit(TextDelta("Hi"))
    emit(ToolEvent("dice", "rolled 4"))
    kinds = [(e[1], e[2].get("kind")) for e in logged(log, "t")]
    assert kinds == [("notice", "member"), ("text", None), ("tool", None)]


async def test_delivery_hands_the_tee_each_piece_in_place() -> None:
    log = InMemoryTurnEventLog()
    recorded = RecordingSink()
    delivery = Delivery(TeeSink([recorded, EventLogSink(log, "t")]))
    delivery.send(0, TextDelta("a"))
    # no await between: the piece is already in both sinks, and no worker task was made
    assert recorded.text == "a" and logged(log, "t") == [("1", "text", {"text": "a"})]
    assert delivery._worker is None
    assert delivery.delivered(0) == "a"


async def test_an_outage_that_fails_a_turn_is_logged_as_unavailable_naming_no_address() -> None:
    """A turn that failed because the database could not be reached: its ``error`` event says
    so (class and code ``unavailable``), not "unknown (unknown)", and names no address."""
    log = AwaitedLog()
    cause = StoreUnavailable("database at 10.0.0.5:5432 refused the connection")
    error = TurnError("unknown", "unknown", "m1", cause=cause, reported=True)
    await EventLogSink(log, "t").emit(ErrorEvent(error))  # type: ignore[arg-type]
    [(type_, data)] = log.events
    assert type_ == "error"
    assert data["class"] == "StoreUnavailable" and data["code"] == "unavailable"
    assert "10.0.0.5" not in data["message"] and "unknown" not in data["message"]
