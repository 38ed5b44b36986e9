"""The options every chat turn verb takes alike, declared once: :class:`TurnKeywords` (what a
caller passes) and :class:`TurnCall` (one verb's call, as the turn core runs it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from tavernkit.chat.group_speaker import GroupSpeaker
from tavernkit.chat.prepare import TurnOverrides
from tavernkit.generation.abort import AbortSignal
from tavernkit.generation.sink import ResponseSink
from tavernkit.store.chat_types import ChatInfo

__all__ = ["Overrides", "TurnCall", "TurnKeywords"]

Overrides = TurnOverrides | Mapping[str, Any] | None


class TurnKeywords(TypedDict, total=False):
    """The keyword options every turn verb takes alike, declared once (each verb adds its
    own): ``stream`` (default true; false for
    :meth:`~tavernkit.chat.service.ChatService.quiet`), ``overrides`` (a
    :class:`~tavernkit.chat.prepare.TurnOverrides` or its mapping), ``sink`` (who else sees the
    reply's events), ``interrupt`` (stop a running turn of the chat instead of raising
    ``ChatBusy``), ``abort`` and ``checked`` (the chat as its caller read it for this owner
    just before, its overrides checked: the server's turn start, so the turn reads neither
    again)."""

    stream: bool
    overrides: Overrides
    sink: ResponseSink | None
    interrupt: bool
    abort: AbortSignal | None
    checked: ChatInfo | None


_TURN_KEYWORDS = frozenset(TurnKeywords.__annotations__)


@dataclass(frozen=True, kw_only=True)
class TurnCall:
    """One verb's call: its generation type and the options every verb passes alike."""

    kind: str
    interrupt: bool = False
    abort: AbortSignal | None = None
    sink: ResponseSink | None = None
    prefill: str | None = None
    stream: bool = True
    overrides: Overrides = None
    quiet_prompt: str = ""
    quiet_name: str | None = None
    loud: bool = False
    #: a group turn's drafted member (see :mod:`.group_turn`); ``None`` in a solo chat
    member: GroupSpeaker | None = None
    #: the chat as the caller read and checked it (see :class:`TurnKeywords`)
    checked: ChatInfo | None = None

    @classmethod
    def of(cls, kind: str, options: TurnKeywords, **own: Any) -> TurnCall:
        """The turn of verb ``kind`` with the caller's ``options`` and the verb's ``own``; an
        option no verb takes is a ``TypeError`` naming it, as for any keyword."""
        unknown = sorted(set(options) - _TURN_KEYWORDS)
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) for {kind}: {', '.join(unknown)}")
        return cls(kind=kind, **own, **options)
