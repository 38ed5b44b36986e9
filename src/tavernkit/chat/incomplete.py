"""Replies left unfinished, as the store keeps them.

A reply is unfinished when its swipe is still marked partial: the process died mid-reply (the
streaming sink's last write), or the turn failed after part of the reply was delivered. A
stopped turn (the user's stop) is kept as shown but stays partial too, recorded as
``stopped``. A failed turn also records why, by error class and safe code only (never the provider's
message), under the swipe's ``extra.extensions.turn_error``; a crash records nothing, so its
``error_class`` is ``None``. A later turn that completes the reply (``continue_``) or an edit
clears both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tavernkit.generation.result import TurnError
from tavernkit.store.chat_types import StoredMessage

__all__ = [
    "STOPPED_RECORD",
    "TURN_ERROR_KEY",
    "IncompleteReply",
    "incomplete_reply",
    "turn_error_record",
]

#: where a failed turn's error goes, under the swipe's (and message's) ``extra.extensions``
TURN_ERROR_KEY = "turn_error"
#: what a reply the user stopped records there
STOPPED_RECORD = {"error_class": "stopped", "code": "stopped"}


@dataclass(frozen=True, slots=True)
class IncompleteReply:
    """The shown (or asked for) swipe of a reply that never finished. ``error_class`` and
    ``code`` are the failed turn's (``None`` when nothing recorded why: a crash)."""

    swipe_index: int
    error_class: str | None = None
    code: str | None = None

    def text(self) -> str:
        """A one-line label for a display (``incomplete``, or why)."""
        if self.error_class is None:
            return "incomplete (interrupted)"
        if self.error_class == STOPPED_RECORD["error_class"]:
            return "stopped before the end"
        return f"incomplete ({self.error_class}: {self.code})"


def turn_error_record(error: TurnError) -> dict[str, str]:
    """What is stored about a failed turn's error: its class and safe code, nothing else."""
    return {"error_class": error.error_class, "code": error.code}


def incomplete_reply(
    message: StoredMessage, swipe_index: int | None = None
) -> IncompleteReply | None:
    """Whether ``message``'s swipe (by default the shown one) is unfinished, and why;
    ``None`` when it is complete."""
    data = message.data
    shown = data.get("swipe_id")
    index = swipe_index if swipe_index is not None else shown if isinstance(shown, int) else 0
    if index not in message.partial_swipes:
        return None
    record = _turn_error(_swipe_extra(data, index))
    if record is None and index == shown:
        record = _turn_error(data.get("extra"))
    if record is None:
        return IncompleteReply(index)
    return IncompleteReply(index, record[0], record[1])


def _swipe_extra(data: dict[str, Any], index: int) -> Any:
    infos = data.get("swipe_info")
    if isinstance(infos, list) and 0 <= index < len(infos) and isinstance(infos[index], dict):
        return infos[index].get("extra")
    return None


def _turn_error(extra: Any) -> tuple[str, str] | None:
    if not isinstance(extra, dict):
        return None
    extensions = extra.get("extensions")
    record = extensions.get(TURN_ERROR_KEY) if isinstance(extensions, dict) else None
    if not isinstance(record, dict):
        return None
    cls, code = record.get("error_class"), record.get("code")
    if not isinstance(cls, str) or not isinstance(code, str):
        return None
    return cls, code
