"""tavernkit.store: persistence behind the :class:`Store` protocol; SQLite is the embedded
default, PostgreSQL the one several processes share (:func:`open_store` picks by target)."""

from __future__ import annotations

from tavernkit.store.backends import open_store
from tavernkit.store.paths import data_dir, default_db_path
from tavernkit.store.postgres import PostgresStore, open_postgres_store
from tavernkit.store.protocol import (
    KINDS,
    UNIQUE_NAME_KINDS,
    ApiKeyInfo,
    ChatInfo,
    Document,
    KeyState,
    MessageHit,
    MessageHits,
    ModelRegistry,
    RecordInfo,
    RecordRef,
    Store,
    StoredChat,
    StoredMessage,
    StoredRecord,
)
from tavernkit.store.sqlite import SqliteStore, WriteStats

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
