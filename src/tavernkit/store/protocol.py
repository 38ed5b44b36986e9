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

The values it speaks in live beside it: :mod:`~tavernkit.store.record_types` (kinds,
documents, record results), :mod:`~tavernkit.store.chat_types` (chats, messages, branches,
hits) and :mod:`~tavernkit.store.key_types` (API keys and their pool state).
"""

from __future__ import annotations

import builtins
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.store.accounts import AccountStore
from tavernkit.store.chat_types import (
    ChatInfo,
    ChatTree,
    MessageHits,
    StoredChat,
    StoredChatWindow,
    StoredMessage,
    SwipeText,
    TurnStart,
)
from tavernkit.store.key_types import ApiKeyInfo, KeyState
from tavernkit.store.record_types import (
    Document,
    JsonValue,
    ListOrder,
    RecordInfo,
    RecordPage,
    RecordRef,
    SharedRecord,
    StoredRecord,
)

__all__ = ["Store"]


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

    async def records_with_blob(
        self,
        kind: str,
        ids: Sequence[str],
        blob: str = "avatar",
        *,
        owner: str = DEFAULT_OWNER,
    ) -> builtins.set[str]:
        """Those of the records ``ids`` (ids, not names) of ``kind`` and ``owner`` that have a
        blob named ``blob``: one indexed query for a page of ids (a list line says whether its
        character has an avatar), where :meth:`list_blobs` is a query per record. An id that
        is another owner's, of another kind or not there is left out."""
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
