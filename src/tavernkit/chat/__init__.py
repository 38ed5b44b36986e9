"""tavernkit.chat: the chat service (every turn a user takes) and its store sink.

:class:`ChatService` (:mod:`.service`) has the verbs (the group ones in :mod:`.group_verbs`,
the steps every turn shares in :mod:`.turn_core`, the user's stored message in
:mod:`.user_input`, their options in :mod:`.turn_options`);
:mod:`.prepare` builds a turn's prompt and request, :mod:`.plan` its plan (profile, key pool,
fallback chain), :mod:`.run` runs it through :func:`tavernkit.generation.run_turn`. A
streaming swipe is persisted as it arrives by :class:`StoreSink` (:mod:`.sink`); :mod:`.reply`
writes the finished (or failed) reply.

The names are imported on first use (module ``__getattr__``): a module that needs one helper
of this package (the library names new chats with :func:`.greetings.chat_name`) does not
import the whole turn engine with it, so a Tavern made and opened for a command that takes no
turn does not pay for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tavernkit._lazy_face import lazy_face
from tavernkit.errors import ChatBusy

if TYPE_CHECKING:
    from tavernkit.chat.prepare import PreparedTurn, TurnOverrides
    from tavernkit.chat.service import ChatService, TurnOutcome
    from tavernkit.chat.sink import StoreSink, TeeSink

__all__ = [
    "ChatBusy",
    "ChatService",
    "PreparedTurn",
    "StoreSink",
    "TeeSink",
    "TurnOutcome",
    "TurnOverrides",
]

#: name -> the module that defines it, imported when the name is first read
_LAZY: dict[str, str] = {
    "ChatService": "tavernkit.chat.service",
    "PreparedTurn": "tavernkit.chat.prepare",
    "StoreSink": "tavernkit.chat.sink",
    "TeeSink": "tavernkit.chat.sink",
    "TurnOutcome": "tavernkit.chat.service",
    "TurnOverrides": "tavernkit.chat.prepare",
}

__getattr__, __dir__ = lazy_face("tavernkit.chat", globals(), _LAZY)
