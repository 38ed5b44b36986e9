"""The persistence protocol every store implements, and the values it hands back.

Callers (the facade, ChatService, the CLI) program against :class:`Store` only; the embedded
SQLite store (:mod:`tavernkit.store.sqlite`) is one implementation and a PostgreSQL one can be a
sibling module. So the protocol speaks in JSON-ready values and small frozen result types, never
in rows, cursors or SQL, and every call names its ``owner`` (a single-user install passes the
default), so the server can become multi-user without a change of meaning.

Document records (characters, presets, templates, profiles...) are stored as the JSON their
model writes (``to_wire()`` for the open formats, ``model_dump`` for our own) and validated
again on the way out by the model class registered for their kind: the store does not depend
on the models' exact fields, and unknown keys survive because the JSON is kept as it was.

Chats are not one document: the header and each message are rows of their own and each swipe
is a row under its message, so that appending a message or a swipe, or streaming into one, is a
small write whatever the length of the chat (SillyTavern rewrites the whole ``.jsonl`` on every
save, which is what makes its long chats slow).
"""

from __future__ import annotations

import builtins
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ValidationError

from tavernkit.errors import FormatError
from tavernkit.models._base import DEFAULT_OWNER
from tavernkit.models.chat import Chat, ChatHeader, Message

__all__ = [
    "KINDS",
    "UNIQUE_NAME_KINDS",
    "ApiKeyInfo",
    "ChatInfo",
    "Document",
    "JsonValue",
    "KeyState",
    "ModelRegistry",
    "RecordInfo",
    "RecordRef",
    "Store",
    "StoredChat",
    "StoredMessage",
    "StoredRecord",
]

#: A value JSON can hold (what global variables and metadata values are).
JsonValue = Any

#: A document as callers hand it over: a model (written with ``to_wire()`` / ``model_dump``) or
#: its JSON mapping.
Document = Mapping[str, Any] | BaseModel

#: kind -> the model class that validates records of that kind on load; the facade fills it.
ModelRegistry = Mapping[str, type[BaseModel]]

#: Every kind of document record the store keeps. ``settings`` is not here: it is one document
#: per owner with calls of its own.
KINDS: frozenset[str] = frozenset(
    {
        "character",
        "persona",
        "lorebook",
        "chat_preset",
        "instruct",
        "context",
        "sysprompt",
        "reasoning",
        "textgen_preset",
        "kobold_preset",
        "novel_preset",
        "connection_profile",
        "fallback_chain",
        "custom_endpoint",
        "quick_reply_set",
    }
)

#: Kinds whose names are unique per owner, so ``show NAME`` and ``export NAME`` find one record.
#: Personas are the exception: SillyTavern keys them by avatar file and users reuse names.
UNIQUE_NAME_KINDS: frozenset[str] = KINDS - {"persona"}


@dataclass(frozen=True, slots=True)
class RecordRef:
    """What a write returns: enough to find the record again."""

    kind: str
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class RecordInfo:
    """One line of a listing: never the document itself, never a blob."""

    kind: str
    id: str
    name: str
    owner: str
    created: datetime
    updated: datetime


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A record's JSON as it was written, with its listing line."""

    info: RecordInfo
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ApiKeyInfo:
    """An API key as list calls show it. There is deliberately no field that holds the secret or
    any part of it; ``fingerprint`` (a short hash) only tells two keys apart."""

    id: str
    provider: str
    label: str
    fingerprint: str
    created: datetime


@dataclass(frozen=True, slots=True)
class KeyState:
    """Key-pool bookkeeping for one credential (no secret here)."""

    key_id: str
    cooldown_until: datetime | None = None
    failures: int = 0
    last_error_code: str | None = None
    last_used: datetime | None = None
    #: successful uses (the pool's least-used-first order)
    uses: int = 0


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
class StoredMessage:
    """One chat message as SillyTavern's JSON (swipes and swipe_info included), with its id.

    ``partial_swipes`` lists the swipe indexes whose text was persisted while streaming and
    never marked complete (a crash mid-reply leaves them so)."""

    id: str
    position: int
    data: dict[str, Any]
    partial_swipes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class StoredChat:
    """A whole chat: the header line and the messages, in order."""

    info: ChatInfo
    header: dict[str, Any]
    messages: list[StoredMessage] = field(default_factory=list)

    def lines(self) -> builtins.list[dict[str, Any]]:
        """The chat as SillyTavern's JSONL lines (header first), ready for the chat writer."""
        return [self.header, *(m.data for m in self.messages)]

    def to_chat(self) -> Chat:
        """The chat as the :class:`~tavernkit.models.chat.Chat` model (raises
        :class:`~tavernkit.errors.FormatError` naming the message if one no longer validates)."""
        source = f"<store chat {self.info.id}>"
        try:
            header = ChatHeader.model_validate(self.header)
        except ValidationError as exc:
            raise FormatError(str(exc), source=source, field="header") from exc
        messages: builtins.list[Message] = []
        for m in self.messages:
            try:
                messages.append(Message.model_validate(m.data))
            except ValidationError as exc:
                raise FormatError(str(exc), source=source, field=f"messages[{m.position}]") from exc
        return Chat(header=header, messages=messages)


@runtime_checkable
class Store(Protocol):
    """Async persistence for everything a user owns. Every call is scoped by ``owner``; a record
    of another owner is :class:`~tavernkit.errors.NotFound`, never visible.

    Errors: :class:`~tavernkit.errors.NotFound` for a missing id/name,
    :class:`~tavernkit.errors.Conflict` for a taken name or an ambiguous one,
    :class:`~tavernkit.errors.StoreError` for anything else; driver exceptions never escape.
    """

    async def close(self) -> None: ...

    # -- document records ---------------------------------------------------------------
    async def put(
        self,
        kind: str,
        record: Document,
        *,
        owner: str = DEFAULT_OWNER,
        name: str | None = None,
        id: str | None = None,
        blobs: Mapping[str, bytes] | None = None,
    ) -> RecordRef:
        """Create a record, or replace the one with ``id``. ``name`` defaults to the record's
        ``name`` (or ``data.name`` for a card). ``blobs`` (e.g. ``{"avatar": png}``) are stored
        beside it; ones not named are kept."""
        ...

    async def get(self, kind: str, ref: str, *, owner: str = DEFAULT_OWNER) -> BaseModel:
        """The record (by id, else by name) validated by the model registered for ``kind``."""
        ...

    async def get_record(self, kind: str, ref: str, *, owner: str = DEFAULT_OWNER) -> StoredRecord:
        """The record's JSON as stored, with its listing line."""
        ...

    async def list(self, kind: str, *, owner: str = DEFAULT_OWNER) -> builtins.list[RecordInfo]: ...

    async def delete(self, kind: str, ref: str, *, owner: str = DEFAULT_OWNER) -> None: ...

    async def get_blob(
        self, kind: str, ref: str, blob: str = "avatar", *, owner: str = DEFAULT_OWNER
    ) -> bytes | None: ...

    async def set_blob(
        self, kind: str, ref: str, blob: str, data: bytes | None, *, owner: str = DEFAULT_OWNER
    ) -> None:
        """Store ``data`` under ``blob`` for the record; ``None`` removes it."""
        ...

    async def list_blobs(
        self, kind: str, ref: str, *, owner: str = DEFAULT_OWNER
    ) -> builtins.list[str]:
        """The names of the record's blobs, in the order they were first stored."""
        ...

    async def link(
        self,
        kind: str,
        ref: str,
        rel: str,
        target_kind: str,
        target_ref: str,
        *,
        owner: str = DEFAULT_OWNER,
    ) -> None:
        """Link two records (a character to its lorebook: ``rel="lorebook"``). Links go away with
        either record."""
        ...

    async def unlink(
        self,
        kind: str,
        ref: str,
        rel: str,
        target_kind: str,
        target_ref: str,
        *,
        owner: str = DEFAULT_OWNER,
    ) -> None: ...

    async def links(
        self, kind: str, ref: str, rel: str, *, owner: str = DEFAULT_OWNER
    ) -> builtins.list[RecordInfo]:
        """The records ``ref`` links to under ``rel``, in the order they were linked."""
        ...

    # -- settings and global variables ------------------------------------------------------
    async def get_settings(self, *, owner: str = DEFAULT_OWNER) -> BaseModel | None: ...

    async def put_settings(self, settings: Document, *, owner: str = DEFAULT_OWNER) -> None: ...

    async def get_global_variables(self, *, owner: str = DEFAULT_OWNER) -> dict[str, JsonValue]: ...

    async def set_global_variable(
        self, name: str, value: JsonValue, *, owner: str = DEFAULT_OWNER
    ) -> None: ...

    async def delete_global_variable(self, name: str, *, owner: str = DEFAULT_OWNER) -> None: ...

    # -- API keys and key-pool state --------------------------------------------------------
    async def add_api_key(
        self, provider: str, secret: str, *, owner: str = DEFAULT_OWNER, label: str = ""
    ) -> str:
        """Store a secret; returns its key id (what profiles and fallback chains refer to)."""
        ...

    async def list_api_keys(
        self, provider: str | None = None, *, owner: str = DEFAULT_OWNER
    ) -> builtins.list[ApiKeyInfo]: ...

    async def get_api_key_secret(self, key_id: str, *, owner: str = DEFAULT_OWNER) -> str:
        """The one call that returns a secret."""
        ...

    async def delete_api_key(self, key_id: str, *, owner: str = DEFAULT_OWNER) -> None: ...

    async def get_key_state(self, key_id: str, *, owner: str = DEFAULT_OWNER) -> KeyState: ...

    async def put_key_state(self, state: KeyState, *, owner: str = DEFAULT_OWNER) -> None: ...

    # -- chats ----------------------------------------------------------------------------
    async def create_chat(
        self,
        header: Document,
        messages: Sequence[Document] = (),
        *,
        owner: str = DEFAULT_OWNER,
        name: str,
        character: str | None = None,
    ) -> ChatInfo:
        """A new chat from a header line and messages (an import is one call). ``character``
        (id or name) attaches it to a stored character."""
        ...

    async def list_chats(
        self, *, owner: str = DEFAULT_OWNER, character: str | None = None
    ) -> builtins.list[ChatInfo]: ...

    async def get_chat_info(self, ref: str, *, owner: str = DEFAULT_OWNER) -> ChatInfo: ...

    async def load_chat(self, ref: str, *, owner: str = DEFAULT_OWNER) -> StoredChat: ...

    async def delete_chat(self, ref: str, *, owner: str = DEFAULT_OWNER) -> None: ...

    async def rename_chat(self, ref: str, name: str, *, owner: str = DEFAULT_OWNER) -> None: ...

    async def set_chats_character_name(
        self, character_id: str, name: str, *, owner: str = DEFAULT_OWNER
    ) -> int:
        """The character name the chats of ``character_id`` list under (after a rename);
        returns how many chats changed."""
        ...

    async def update_chat_header(
        self, chat_id: str, header: Document, *, owner: str = DEFAULT_OWNER
    ) -> None: ...

    async def update_chat_metadata(
        self, chat_id: str, metadata: Mapping[str, Any], *, owner: str = DEFAULT_OWNER
    ) -> None:
        """Replace the header's ``chat_metadata`` (variables, timed world-info state, author's
        note): one row."""
        ...

    async def append_message(
        self, chat_id: str, message: Document, *, owner: str = DEFAULT_OWNER
    ) -> StoredMessage: ...

    async def get_message(
        self, message_id: str, *, owner: str = DEFAULT_OWNER
    ) -> StoredMessage: ...

    async def update_message(
        self,
        message_id: str,
        message: Document,
        *,
        partial: Collection[int] = (),
        owner: str = DEFAULT_OWNER,
    ) -> None:
        """Replace one message (its swipes too). The swipes at the indexes in ``partial``
        stay marked partial (a reply a failed turn left unfinished); the others are complete."""
        ...

    async def truncate_chat(
        self, chat_id: str, position: int, *, owner: str = DEFAULT_OWNER
    ) -> int:
        """Delete the messages at ``position`` and after; returns how many went."""
        ...

    async def append_swipe(
        self,
        message_id: str,
        text: str,
        *,
        info: Mapping[str, Any] | None = None,
        activate: bool = True,
        complete: bool = True,
        owner: str = DEFAULT_OWNER,
    ) -> int:
        """Add a swipe to a message; returns its index. ``activate`` makes it the shown one."""
        ...

    async def update_swipe_text(
        self,
        message_id: str,
        swipe_index: int,
        text: str,
        *,
        complete: bool,
        owner: str = DEFAULT_OWNER,
    ) -> None:
        """Persist a swipe's text as it streams; ``complete`` marks the final write."""
        ...

    async def set_active_swipe(
        self, message_id: str, swipe_index: int, *, owner: str = DEFAULT_OWNER
    ) -> None: ...

    async def delete_swipe(
        self, message_id: str, swipe_index: int, *, owner: str = DEFAULT_OWNER
    ) -> None: ...
