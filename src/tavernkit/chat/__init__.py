"""tavernkit.chat: the chat service (every turn a user takes) and its store sink.

:class:`ChatService` (:mod:`.service`) has the verbs (the group ones in :mod:`.group_verbs`,
the steps every turn shares in :mod:`.turn_core`, their options in :mod:`.turn_options`);
:mod:`.prepare` builds a turn's prompt and request, :mod:`.plan` its plan (profile, key pool,
fallback chain), :mod:`.run` runs it through :func:`tavernkit.generation.run_turn`. A
streaming swipe is persisted as it arrives by :class:`StoreSink` (:mod:`.sink`); :mod:`.reply`
writes the finished (or failed) reply."""

from __future__ import annotations

from tavernkit.chat.prepare import PreparedTurn, TurnOverrides
from tavernkit.chat.service import ChatService, TurnOutcome
from tavernkit.chat.sink import StoreSink, TeeSink
from tavernkit.errors import ChatBusy

__all__ = [
    "ChatBusy",
    "ChatService",
    "PreparedTurn",
    "StoreSink",
    "TeeSink",
    "TurnOutcome",
    "TurnOverrides",
]
