"""The values the :class:`~tavernkit.store.protocol.Store` speaks about document records:
the kinds it keeps, a document as callers hand it over, and the small frozen results of its
record calls (:class:`RecordRef`, :class:`RecordInfo`, :class:`RecordPage`,
:class:`StoredRecord`, :class:`SharedRecord`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

__all__ = [
    "ENTRY_LINE_FIELDS",
    "KINDS",
    "UNIQUE_NAME_KINDS",
    "Document",
    "JsonValue",
    "ListOrder",
    "ModelRegistry",
    "RecordInfo",
    "RecordPage",
    "RecordRef",
    "SharedRecord",
    "StoredRecord",
]

#: what a lorebook entry's line holds
#: (:meth:`~tavernkit.store.protocol.Store.lorebook_entry_lines`: an editor's list row, its
#: filters and sorts, not the entry's content), each line ``[value of each..., uid]``
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


#: the orders :meth:`~tavernkit.store.protocol.Store.list_page` reads a page in: by name (case
#: folded, A-Z or Z-A), by when the record was made (newest or oldest first) or last written
#: (latest first), or a character's favourites first, then by name, or the characters with the
#: latest chat first (then those never chatted with, by name)
ListOrder = Literal["name", "name_desc", "newest", "oldest", "updated", "fav", "chatted"]


@dataclass(frozen=True, slots=True)
class RecordPage:
    """One page of a listing and how many lines the whole listing has."""

    items: list[RecordInfo]
    total: int


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A record's JSON as it was written, with its listing line."""

    info: RecordInfo
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SharedRecord:
    """A record as :meth:`~tavernkit.store.protocol.Store.get_shared_record` shares it: the
    validated model, the JSON it was validated from (``model.to_wire() == data`` for the open
    formats: their models are lossless) and a hash of that JSON. All three are shared and
    read-only."""

    model: BaseModel
    data: dict[str, Any]
    digest: str
    #: the record's id (what a ref by name resolved to)
    id: str = ""
    #: when the record was made (``None``: a store that does not say)
    created: datetime | None = None
