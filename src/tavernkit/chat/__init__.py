"""tavernkit.chat: the chat service (every turn a user takes) and its store sink."""

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
