"""The values the :class:`~tavernkit.store.protocol.Store` speaks about chats: a chat's
listing line (:class:`ChatInfo`), its stored messages, branches and search hits, a whole chat
(:class:`StoredChat`) or the window a turn reads (:class:`StoredChatWindow`, in
:class:`TurnStart`), each made into the :class:`~tavernkit.models.chat.Chat` model on demand."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tavernkit.errors import FormatError
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.models.chat import Chat, ChatHeader, Message
from tavernkit.models.chat_window import MessageCounts, MessageWindow
from tavernkit.store.record_types import JsonValue

__all__ = [
    "ChatBranch",
    "ChatInfo",
    "ChatTree",
    "MessageHit",
    "MessageHits",
    "StoredChat",
    "StoredChatWindow",
    "StoredMessage",
    "SwipeText",
    "TurnStart",
]

_M = TypeVar("_M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class SwipeText:
    """One streaming swipe's text for
    :meth:`~tavernkit.store.protocol.Store.update_swipe_texts` (kept partial)."""

    message_id: str
    swipe_index: int
    text: str
    owner: str = DEFAULT_OWNER


@dataclass(frozen=True, slots=True)
class ChatInfo:
    """One line of a chat listing."""

    id: str
    name: str
    owner: str
    character_id: str | None
    character_name: str | None
    message_count: int
    created: datetime
    updated: datetime


@dataclass(frozen=True, slots=True)
class MessageHit:
    """One message a search found: where it is (its chat and its 0-based ``index`` there, as
    the message routes number it), who spoke, and a plain-text ``snippet`` of its shown text
    around the first match."""

    chat_id: str
    chat_name: str
    character_id: str | None
    character_name: str | None
    message_id: str
    index: int
    #: the speaker (the message's ``name``)
    name: str
    is_user: bool
    snippet: str


@dataclass(frozen=True, slots=True)
class MessageHits:
    """A page of a message search's hits and how many there are in all."""

    hits: list[MessageHit]
    total: int


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One chat message as SillyTavern's JSON (swipes and swipe_info included), with its id.

    ``partial_swipes`` lists the swipe indexes whose text was persisted while streaming and
    never marked complete (a crash mid-reply leaves them so)."""

    id: str
    position: int
    data: dict[str, Any]
    partial_swipes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ChatBranch:
    """One branch of a chat's tree (:mod:`tavernkit.store.chat_tree`): its own messages start
    at ``fork`` and continue ``parent``'s path."""

    id: str
    parent: str | None
    fork: int
    #: how many messages are its own (on the current path or parked)
    length: int
    #: its first own message (SillyTavern's JSON), for a preview; ``None`` when it has none
    first: dict[str, Any] | None
    #: whether the current path goes through it
    on_path: bool
    #: its own message at each position where another branch forks from it (what that
    #: branch is the alternative to)
    at_forks: dict[int, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChatTree:
    """A chat's branches, root first, and the branch whose path is the current one. A chat
    that never branched is one branch, ``main``, holding every message."""

    info: ChatInfo
    current: str
    branches: list[ChatBranch]


@dataclass(frozen=True, slots=True)
class StoredChat:
    """A whole chat: the header line and the messages, in order."""

    info: ChatInfo
    header: dict[str, Any]
    messages: list[StoredMessage] = field(default_factory=list)

    def lines(self) -> list[dict[str, Any]]:
        """The chat as SillyTavern's JSONL lines (header first), ready for the chat writer."""
        return [self.header, *(m.data for m in self.messages)]

    def to_chat(self) -> Chat:
        """The chat as the :class:`~tavernkit.models.chat.Chat` model (raises
        :class:`~tavernkit.errors.FormatError` naming the message if one no longer validates)."""
        source = f"<store chat {self.info.id}>"
        header = _validate_part(ChatHeader, self.header, source, "header")
        return Chat(header=header, messages=[_message(m, source) for m in self.messages])


@dataclass(frozen=True, slots=True)
class StoredChatWindow:
    """The part of a chat a turn reads: the newest messages (``tail``), the oldest ones up to the
    first visible message (``head``, empty when ``tail`` reaches the start) and the counts of the
    messages between them (``gap``), which are not read. ``info.message_count`` is the whole
    chat's length."""

    info: ChatInfo
    header: dict[str, Any]
    head: list[StoredMessage]
    tail: list[StoredMessage]
    gap: MessageCounts = field(default_factory=MessageCounts)

    @property
    def complete(self) -> bool:
        """Whether the window holds every message of the chat."""
        return self.gap.total == 0

    def to_chat(self) -> Chat:
        """The chat as the :class:`~tavernkit.models.chat.Chat` model whose ``messages`` is a
        :class:`~tavernkit.models.chat_window.MessageWindow` (a plain list when the window
        holds the whole chat); raises :class:`~tavernkit.errors.FormatError` as
        :meth:`StoredChat.to_chat` does."""
        source = f"<store chat {self.info.id}>"
        header = _validate_part(ChatHeader, self.header, source, "header")
        head = [_window_message(m, source) for m in self.head]
        tail = [_window_message(m, source) for m in self.tail]
        if self.complete:
            return Chat(header=header, messages=[*head, *tail])
        window = MessageWindow(head, tail, self.gap)
        # Constructed, not validated: the window is a Sequence, not the list the field holds.
        return Chat.model_construct(header=header, messages=window)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class TurnStart:
    """What a turn reads first, together
    (:meth:`~tavernkit.store.protocol.Store.load_turn_start`): the owner's settings (``None``
    when none are stored), the chat's window and the owner's global variables."""

    settings: BaseModel | None
    window: StoredChatWindow
    global_variables: dict[str, JsonValue]


def _validate_part(cls: type[_M], data: Any, source: str, where: str) -> _M:
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise FormatError(str(exc), source=source, field=where) from exc


def _message(m: StoredMessage, source: str) -> Message:
    return _validate_part(Message, m.data, source, f"messages[{m.position}]")


#: message id -> (its JSON, the model made of it): a turn's window is mostly the last turn's.
_WINDOW_MESSAGES: OrderedDict[str, tuple[dict[str, Any], Message]] = OrderedDict()
_WINDOW_MESSAGES_MAX = 4096


def _window_message(m: StoredMessage, source: str) -> Message:
    """The model of a window's message, shared with the last turn's window while the message's
    JSON is unchanged (an edited message is validated again): turns read, never edit, it."""
    known = _WINDOW_MESSAGES.get(m.id)
    if known is not None and known[0] == m.data:
        _WINDOW_MESSAGES.move_to_end(m.id)
        return known[1]
    message = _message(m, source)
    _WINDOW_MESSAGES[m.id] = (m.data, message)
    if len(_WINDOW_MESSAGES) > _WINDOW_MESSAGES_MAX:
        _WINDOW_MESSAGES.popitem(last=False)
    return message
