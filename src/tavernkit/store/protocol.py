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
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ValidationError

from tavernkit.errors import FormatError
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.models.chat import Chat, ChatHeader, Message
from tavernkit.models.chat_window import MessageCounts, MessageWindow
from tavernkit.store.accounts import AccountStore

__all__ = [
    "ENTRY_LINE_FIELDS",
    "KINDS",
    "UNIQUE_NAME_KINDS",
    "ApiKeyInfo",
    "ChatBranch",
    "ChatInfo",
    "ChatTree",
    "Document",
    "JsonValue",
    "KeyState",
    "ListOrder",
    "MessageCounts",
    "MessageHit",
    "MessageHits",
    "ModelRegistry",
    "RecordInfo",
    "RecordPage",
    "RecordRef",
    "SharedRecord",
    "Store",
    "StoredChat",
    "StoredChatWindow",
    "StoredMessage",
    "StoredRecord",
    "SwipeText",
    "TurnStart",
]

#: what a lorebook entry's line holds (:meth:`Store.lorebook_entry_lines`: an editor's list
#: row, its filters and sorts, not the entry's content), each line ``[value of each..., uid]``
ENTRY_LINE_FIELDS: tuple[str, ...] = (
    "comment",
    "key",
    "keysecondary",
    "disable",
    "constant",
    "order",
    "depth",
    "probability",
    "displayIndex",
)

_M = TypeVar("_M", bound=BaseModel)

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
        "group",
        "mcp_server",
        "chatluna_preset",
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


#: the orders :meth:`Store.list_page` reads a page in: by name (case folded, A-Z or Z-A), by
#: when the record was made (newest or oldest first) or last written (latest first), or a
#: character's favourites first, then by name, or the characters with the latest chat first
#: (then those never chatted with, by name)
ListOrder = Literal["name", "name_desc", "newest", "oldest", "updated", "fav", "chatted"]


@dataclass(frozen=True, slots=True)
class RecordPage:
    """One page of a listing and how many lines the whole listing has."""

    items: builtins.list[RecordInfo]
    total: int


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A record's JSON as it was written, with its listing line."""

    info: RecordInfo
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SharedRecord:
    """A record as :meth:`Store.get_shared_record` shares it: the validated model, the JSON it
    was validated from (``model.to_wire() == data`` for the open formats: their models are
    lossless) and a hash of that JSON. All three are shared and read-only."""

    model: BaseModel
    data: dict[str, Any]
    digest: str
    #: the record's id (what a ref by name resolved to)
    id: str = ""
    #: when the record was made (``None``: a store that does not say)
    created: datetime | None = None


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
    """Key-pool bookkeeping for one credential (no secret here): its own (``model=""``: its
    uses and last use), or its rest for one model (``uses`` is then unused)."""

    key_id: str
    model: str = ""
    cooldown_until: datetime | None = None
    failures: int = 0
    last_error_code: str | None = None
    last_used: datetime | None = None
    #: successful uses (the pool's least-used-first order)
    uses: int = 0


@dataclass(frozen=True, slots=True)
class SwipeText:
    """One streaming swipe's text for :meth:`Store.update_swipe_texts` (kept partial)."""

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

    hits: builtins.list[MessageHit]
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
    branches: builtins.list[ChatBranch]


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
    head: builtins.list[StoredMessage]
    tail: builtins.list[StoredMessage]
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
    """What a turn reads first, together (:meth:`Store.load_turn_start`): the owner's
    settings (``None`` when none are stored), the chat's window and the owner's global
    variables."""

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


@runtime_checkable
class Store(AccountStore, Protocol):
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

    async def get_shared(self, kind: str, ref: str, *, owner: str = DEFAULT_OWNER) -> BaseModel:
        """What :meth:`get` returns, but one model shared by every call until the record is
        written again (each write bumps its revision): the turn path reads lorebooks, presets
        and cards this way, so a big record is validated once per revision, not once per turn,
        and the world-info engine finds its compiled form by identity. Callers must treat it as
        read-only (copy it to edit)."""
        ...

    async def get_shared_record(
        self, kind: str, ref: str, *, owner: str = DEFAULT_OWNER
    ) -> SharedRecord:
        """:meth:`get_shared`'s model with the JSON it was validated from and that JSON's hash
        (what the world-info engine keys a compiled lorebook by, so it neither dumps the model
        nor recompiles an unchanged book)."""
        ...

    async def get_shared_records(
        self, wanted: Sequence[tuple[str, str]], *, owner: str = DEFAULT_OWNER
    ) -> dict[tuple[str, str], SharedRecord]:
        """:meth:`get_shared_record` for each ``(kind, ref)`` of ``wanted`` at once (the turn
        path's read of its presets, templates, card, persona and profile: one revision check
        for all of them). A ref that names no record is absent from the answer; an empty ref
        is skipped; a name several records share is a :class:`~tavernkit.errors.Conflict`."""
        ...

    async def get_record(self, kind: str, ref: str, *, owner: str = DEFAULT_OWNER) -> StoredRecord:
        """The record's JSON as stored, with its listing line."""
        ...

    async def get_record_text(
        self, kind: str, ref: str, *, owner: str = DEFAULT_OWNER
    ) -> tuple[RecordInfo, str]:
        """The record's listing line and its JSON text as stored, unparsed (a big record sent
        on as it is: a 28 MB lorebook to the editor)."""
        ...

    async def lorebook_entry_lines(
        self, ref: str, *, content_has: str | None = None, owner: str = DEFAULT_OWNER
    ) -> tuple[RecordInfo, str]:
        """The lorebook's listing line and its entries' lines, a JSON array of
        ``[each of ENTRY_LINE_FIELDS..., uid]`` in the book's order (an editor's list: no
        content); with
        ``content_has``, only the entries whose content holds that text, in any case."""
        ...

    # A member of a record's JSON by its path of object keys (``("entries", "12")``), read or
    # written without the record going through Python whole (see
    # :mod:`tavernkit.store._sqlite_members`). The record is not validated on these writes:
    # the caller checks the member it writes. Each write bumps the record's revision.

    async def get_record_member(
        self, kind: str, ref: str, path: Sequence[str], *, owner: str = DEFAULT_OWNER
    ) -> Any:
        """The member's JSON value; :class:`~tavernkit.errors.NotFound` when it is absent."""
        ...

    async def record_member_keys(
        self, kind: str, ref: str, path: Sequence[str], *, owner: str = DEFAULT_OWNER
    ) -> builtins.list[str]:
        """The keys of the object at ``path``, in order (none when it is absent)."""
        ...

    async def put_record_member(
        self, kind: str, ref: str, path: Sequence[str], value: Any, *, owner: str = DEFAULT_OWNER
    ) -> None:
        """Set the member to ``value`` (a new one goes last; objects along the path are made
        when missing); the record's other keys keep their text and order."""
        ...

    async def delete_record_member(
        self, kind: str, ref: str, path: Sequence[str], *, owner: str = DEFAULT_OWNER
    ) -> None:
        """Remove the member; :class:`~tavernkit.errors.NotFound` when it is absent."""
        ...

    async def list(self, kind: str, *, owner: str = DEFAULT_OWNER) -> builtins.list[RecordInfo]: ...

    async def list_page(
        self,
        kind: str,
        *,
        owner: str = DEFAULT_OWNER,
        offset: int = 0,
        limit: int = 50,
        name_contains: str | None = None,
        order: ListOrder = "name",
        fav: bool | None = None,
        tags: Sequence[str] = (),
    ) -> RecordPage:
        """The lines ``offset`` to ``offset + limit`` of the listing of ``kind`` in ``order``
        (ties by name, then by when made), only those whose name contains ``name_contains``
        (case-insensitively) when it is given, the characters whose favourite flag is ``fav``
        when it is given, those carrying every one of ``tags`` (whatever their case), and the
        number of such lines. Read through an index of the listing lines (migrations 011 and
        014): its cost follows the page, not the number of records (a name filter reads the
        index's names, a tag filter probes an index of the cards' tags, never a record)."""
        ...

    async def character_tags(self, *, owner: str = DEFAULT_OWNER) -> builtins.list[tuple[str, int]]:
        """Every tag of ``owner``'s characters as spelt on them, with the number of cards
        carrying it, by spelling: one row each, kept by triggers (migration 014), so the
        cost follows the number of tags, not of cards."""
        ...

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

    async def storage_used(self, *, owner: str = DEFAULT_OWNER) -> int:
        """The bytes ``owner`` stores: records, their blobs, chats, messages, swipes, memory
        vectors, variables and settings (kept by the database's triggers as they change, so
        this is one row's read; :mod:`tavernkit.store.storage_use`)."""
        ...

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

    async def get_key_state(
        self, key_id: str, *, owner: str = DEFAULT_OWNER, model: str = ""
    ) -> KeyState:
        """The key's own state, or (``model``) its rest for that model."""
        ...

    async def put_key_state(self, state: KeyState, *, owner: str = DEFAULT_OWNER) -> None:
        """Write the key's own state, or (``state.model``) its rest for that model."""
        ...

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

    async def chats_with_integrity(
        self, integrity: str, *, owner: str = DEFAULT_OWNER
    ) -> builtins.list[ChatInfo]:
        """The chats whose header's ``chat_metadata.integrity`` is ``integrity`` (a chat and
        its SillyTavern branches share one), newest first: an index lookup (migration 012)."""
        ...

    async def get_chat_info(self, ref: str, *, owner: str = DEFAULT_OWNER) -> ChatInfo: ...

    async def load_chat(self, ref: str, *, owner: str = DEFAULT_OWNER) -> StoredChat: ...

    async def load_chat_window(
        self, ref: str, *, last: int, owner: str = DEFAULT_OWNER
    ) -> StoredChatWindow:
        """The newest ``last`` messages of a chat, the oldest up to its first visible message
        and the counts of those between (see :class:`StoredChatWindow`): what a turn reads,
        at a cost that does not grow with the chat's length."""
        ...

    async def load_message_range(
        self, ref: str, *, start: int, stop: int, owner: str = DEFAULT_OWNER
    ) -> builtins.list[StoredMessage]:
        """Messages ``start`` to ``stop - 1`` (by position, oldest first) by the
        (chat, position) index: a page of a long chat, anywhere in it, at a cost that does not
        grow with the chat's length."""
        ...

    async def load_turn_start(
        self, chat_ref: str, *, last: int, owner: str = DEFAULT_OWNER
    ) -> TurnStart:
        """:meth:`get_settings`, :meth:`load_chat_window` and :meth:`get_global_variables`
        at once, as cheaply as the store can (SQLite: one read transaction on its read
        connection; PostgreSQL: the three at once on its pool): a turn's first reads, which
        depend on nothing."""
        ...

    async def search_messages(
        self,
        query: str,
        *,
        owner: str = DEFAULT_OWNER,
        chat: str | None = None,
        character: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> MessageHits:
        """The owner's messages whose shown text (``mes``; not the other swipes) holds every
        term of ``query`` (white-space separated; ``"a phrase"`` is one term; no operators),
        case-insensitively, newest first: the most recently updated chat's first, and in a
        chat the last message first. ``chat`` (id or name) or ``character`` (id or name)
        narrows the search; one that names nothing of the owner's is
        :class:`~tavernkit.errors.NotFound`. A page of ``limit`` hits from ``offset``, with
        the total. SQLite finds a term anywhere in a word (a trigram index; a term under three
        characters is checked message by message); PostgreSQL finds words and word prefixes
        (a word index), and text in scripts written without spaces (CJK) anywhere. A query
        with no terms is a :class:`~tavernkit.errors.FormatError`."""
        ...

    async def delete_chat(self, ref: str, *, owner: str = DEFAULT_OWNER) -> None: ...

    async def rename_chat(self, ref: str, name: str, *, owner: str = DEFAULT_OWNER) -> None: ...

    async def set_chats_character_name(
        self, character_id: str, name: str, *, owner: str = DEFAULT_OWNER
    ) -> int:
        """The character name the chats of ``character_id`` list under (after a rename);
        returns how many chats changed."""
        ...

    async def attach_chat(
        self, chat_id: str, character: str, *, owner: str = DEFAULT_OWNER
    ) -> bool:
        """Attach a chat that belongs to no character to ``character`` (id or name): an
        imported chat whose character arrived later. Returns whether it changed (a chat of
        another character is left as it is)."""
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

    async def append_messages(
        self,
        chat_id: str,
        messages: Sequence[Document],
        *,
        owner: str = DEFAULT_OWNER,
        last_partial: Collection[int] = (),
        detached: bool = False,
    ) -> builtins.list[StoredMessage]:
        """Append ``messages`` in order, in one transaction (all or none): a turn stores the
        user's message and its reply's place together. The last message's swipes at the
        indexes in ``last_partial`` are stored marked partial (the reply's place, before it
        streams: the same transaction, so a crash never leaves it looking finished).
        ``detached``: once started, the transaction runs to its end (committed, or rolled
        back on an error) even if the caller is cancelled, for a caller that shields the write
        anyway; SQLite then runs it in one trip to its thread instead of one per statement
        (the reply's place is stored while the turn's request is in flight)."""
        ...

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

    async def chat_tree(self, ref: str, *, owner: str = DEFAULT_OWNER) -> ChatTree:
        """The chat's branches (one read of its branch rows and their first messages)."""
        ...

    async def fork_chat(self, ref: str, position: int, *, owner: str = DEFAULT_OWNER) -> str:
        """Start a new branch at message ``position`` (``1 <= position <`` the path's
        length) and make it current: the path's messages from ``position`` on stay reachable
        in the branch they belong to. Returns the new branch's id."""
        ...

    async def switch_branch(self, ref: str, branch: str, *, owner: str = DEFAULT_OWNER) -> None:
        """Make ``branch``'s path the current one (only the messages past the point where the
        two paths part move)."""
        ...

    async def remove_messages(
        self, ref: str, position: int, count: int, *, owner: str = DEFAULT_OWNER
    ) -> int:
        """Delete ``count`` messages of the current path from ``position`` and move the later
        ones up (keeping their ids), in every branch whose path went through them too;
        returns how many went."""
        ...

    async def insert_message(
        self,
        ref: str,
        position: int,
        message: Mapping[str, Any] | BaseModel,
        *,
        join: bool = False,
        owner: str = DEFAULT_OWNER,
    ) -> StoredMessage:
        """Insert ``message`` into the current path at ``position`` (``0 <= position <=`` the
        path's length) and move the later ones down (keeping their ids), in every branch
        whose path holds them too; :class:`FormatError` for a position outside the path.
        ``join``: the branches that part from the path at ``position`` continue the new
        message too (``chat_tree.spread``)."""
        ...

    async def cut_would_drop(
        self, ref: str, position: int, *, owner: str = DEFAULT_OWNER
    ) -> builtins.list[str]:
        """The branches holding messages off the current path that
        :meth:`truncate_chat` at ``position`` would delete with it (they continue a message
        it deletes); empty when the cut loses nothing but the path's own messages."""
        ...

    async def load_parked(
        self, ref: str, *, owner: str = DEFAULT_OWNER
    ) -> dict[str, builtins.list[StoredMessage]]:
        """The messages off the current path, per branch, in order (empty for a chat that
        never branched)."""
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

    async def update_swipe_texts(self, items: Sequence[SwipeText]) -> builtins.list[int]:
        """Persist the texts of many streaming swipes (of any chats and owners) in one
        transaction, each marked partial as ``update_swipe_text(complete=False)`` does; the
        positions in ``items`` of the swipes that do not exist (for their owner), which are
        skipped while the others are written."""
        ...

    async def set_active_swipe(
        self, message_id: str, swipe_index: int, *, owner: str = DEFAULT_OWNER
    ) -> None: ...

    async def delete_swipe(
        self, message_id: str, swipe_index: int, *, owner: str = DEFAULT_OWNER
    ) -> None: ...
