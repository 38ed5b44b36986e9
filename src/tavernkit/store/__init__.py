"""tavernkit.store: persistence behind the :class:`Store` protocol; SQLite is the embedded
default (:func:`open_store`)."""

from __future__ import annotations

from tavernkit.store.paths import data_dir, default_db_path
from tavernkit.store.protocol import (
    KINDS,
    UNIQUE_NAME_KINDS,
    ApiKeyInfo,
    ChatInfo,
    Document,
    KeyState,
    ModelRegistry,
    RecordInfo,
    RecordRef,
    Store,
    StoredChat,
    StoredMessage,
    StoredRecord,
)
from tavernkit.store.sqlite import SqliteStore, WriteStats, open_store

__all__ = [
    "KINDS",
    "UNIQUE_NAME_KINDS",
    "ApiKeyInfo",
    "ChatInfo",
    "Document",
    "KeyState",
    "ModelRegistry",
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
    "open_store",
]
