"""tavernkit.store: persistence behind the :class:`Store` protocol; SQLite is the embedded
default, PostgreSQL the one several processes share (:func:`open_store` picks by target).

The names are imported on first use (:func:`~tavernkit._lazy_face.lazy_face`): a caller of
``tavernkit.store.paths`` (the facade, for the data dir) does not pay for both backends, their
drivers and every model class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tavernkit._lazy_face import lazy_face

if TYPE_CHECKING:
    from tavernkit.store.backends import open_store
    from tavernkit.store.chat_types import (
        ChatInfo,
        MessageHit,
        MessageHits,
        StoredChat,
        StoredMessage,
    )
    from tavernkit.store.key_types import ApiKeyInfo, KeyState
    from tavernkit.store.paths import data_dir, default_db_path
    from tavernkit.store.postgres import PostgresStore, open_postgres_store
    from tavernkit.store.protocol import Store
    from tavernkit.store.record_types import (
        KINDS,
        UNIQUE_NAME_KINDS,
        Document,
        ModelRegistry,
        RecordInfo,
        RecordRef,
        StoredRecord,
    )
    from tavernkit.store.sqlite import SqliteStore, WriteStats

_PROTOCOL = "tavernkit.store.protocol"
_RECORDS = "tavernkit.store.record_types"
_CHATS = "tavernkit.store.chat_types"
_KEYS = "tavernkit.store.key_types"

#: name -> the module that defines it, imported when the name is first read
_LAZY: dict[str, str] = {
    "KINDS": _RECORDS,
    "UNIQUE_NAME_KINDS": _RECORDS,
    "ApiKeyInfo": _KEYS,
    "ChatInfo": _CHATS,
    "Document": _RECORDS,
    "KeyState": _KEYS,
    "MessageHit": _CHATS,
    "MessageHits": _CHATS,
    "ModelRegistry": _RECORDS,
    "PostgresStore": "tavernkit.store.postgres",
    "RecordInfo": _RECORDS,
    "RecordRef": _RECORDS,
    "SqliteStore": "tavernkit.store.sqlite",
    "Store": _PROTOCOL,
    "StoredChat": _CHATS,
    "StoredMessage": _CHATS,
    "StoredRecord": _RECORDS,
    "WriteStats": "tavernkit.store.sqlite",
    "data_dir": "tavernkit.store.paths",
    "default_db_path": "tavernkit.store.paths",
    "open_postgres_store": "tavernkit.store.postgres",
    "open_store": "tavernkit.store.backends",
}

__all__ = [
    "KINDS",
    "UNIQUE_NAME_KINDS",
    "ApiKeyInfo",
    "ChatInfo",
    "Document",
    "KeyState",
    "MessageHit",
    "MessageHits",
    "ModelRegistry",
    "PostgresStore",
    "RecordInfo",
    "RecordRef",
    "SqliteStore",
    "Store",
    "StoredChat",
    "StoredMessage",
    "StoredRecord",
    "WriteStats",
    "data_dir",
    "default_db_path",
    "open_postgres_store",
    "open_store",
]

__getattr__, __dir__ = lazy_face("tavernkit.store", globals(), _LAZY)
