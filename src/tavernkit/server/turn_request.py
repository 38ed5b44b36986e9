"""A server turn as a client asks for it (:class:`TurnRequest`), the verbs it may name, and
what :meth:`~tavernkit.server.turns.TurnHub.start` answers (:class:`TurnStarted`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["GROUP_TURN_KINDS", "TURN_KINDS", "TurnRequest", "TurnStarted"]

#: the verbs a server turn runs (a quiet prompt is a task, not a turn)
TURN_KINDS = ("send", "swipe", "regenerate", "continue", "impersonate")
#: a group chat's verbs: the solo ones, and ``trigger`` (``member`` replies now)
GROUP_TURN_KINDS = (*TURN_KINDS, "trigger")


@dataclass(frozen=True)
class TurnRequest:
    """One turn as a client asks for it. ``text`` and ``attachments`` (image URLs) are for
    ``send``; ``prefill`` for ``send``, ``swipe`` and ``regenerate``; ``overrides`` is a
    :class:`~tavernkit.chat.prepare.TurnOverrides` mapping. ``group``: a group chat's turn
    (:meth:`~tavernkit.chat.ChatService.group_turn`; ``member`` forces who replies, and is
    required by ``trigger``; ``auto`` makes a ``send`` an auto-mode tick)."""

    kind: str = "send"
    text: str = ""
    attachments: Sequence[str] = ()
    prefill: str | None = None
    overrides: Mapping[str, Any] | None = None
    interrupt: bool = False
    group: bool = False
    member: str | None = None
    auto: bool = False
    #: ``send``/``regenerate`` in place of message ``at`` on a new branch of the chat's tree
    at: int | None = None


@dataclass(frozen=True)
class TurnStarted:
    turn_id: str
    chat_id: str
    kind: str
