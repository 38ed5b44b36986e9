"""Counts what a store is asked for a chat: whole-chat loads (``load_chat``, whose cost grows
with the chat), the messages each window read (``load_chat_window``, or the window of
``load_turn_start``) returned and those each range read (``load_message_range``) returned.
Tests of the promise "this reads a tail of the chat, never all of it" patch a real store with
it."""

from __future__ import annotations

from typing import Any

import pytest

from tavernkit.store.chat_types import StoredChat, StoredChatWindow, StoredMessage, TurnStart
from tavernkit.store.protocol import Store

__all__ = ["ChatReads"]


class ChatReads:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, store: Store) -> None:
        self.whole: list[str] = []
        self.rows: list[int] = []
        self.ranges: list[int] = []
        load_chat, load_window = store.load_chat, store.load_chat_window
        load_start, load_range = store.load_turn_start, store.load_message_range

        async def whole(ref: str, **kwargs: Any) -> StoredChat:
            self.whole.append(ref)
            return await load_chat(ref, **kwargs)

        async def window(ref: str, **kwargs: Any) -> StoredChatWindow:
            got = await load_window(ref, **kwargs)
            self.rows.append(len(got.head) + len(got.tail))
            return got

        async def start(ref: str, **kwargs: Any) -> TurnStart:
            got = await load_start(ref, **kwargs)
            self.rows.append(len(got.window.head) + len(got.window.tail))
            return got

        async def message_range(ref: str, **kwargs: Any) -> list[StoredMessage]:
            got = await load_range(ref, **kwargs)
            self.ranges.append(len(got))
            return got

        monkeypatch.setattr(store, "load_chat", whole)
        monkeypatch.setattr(store, "load_message_range", message_range)
        monkeypatch.setattr(store, "load_chat_window", window)
        monkeypatch.setattr(store, "load_turn_start", start)
