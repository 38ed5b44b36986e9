"""Chat-history macros (messages, ids, swipes)."""

from __future__ import annotations

from collections.abc import Callable

from tavernkit.text.macros.env import MacroEnv
from tavernkit.text.macros.registry import MacroRegistry

__all__ = ["register"]


def _num(value: int | None) -> str:
    return "" if value is None else str(value)


def _range(env: MacroEnv) -> str:
    return "" if env.last_message_id is None else f"0-{env.last_message_id}"


def register(registry: MacroRegistry) -> None:
    entries: dict[str, Callable[[MacroEnv], str]] = {
        "lastMessage": lambda e: e.last_message,
        "lastMessageId": lambda e: _num(e.last_message_id),
        "lastUserMessage": lambda e: e.last_user_message,
        "lastCharMessage": lambda e: e.last_char_message,
        "firstIncludedMessageId": lambda e: _num(e.first_included_message_id),
        "firstDisplayedMessageId": lambda e: _num(e.first_displayed_message_id),
        "lastSwipeId": lambda e: _num(e.last_swipe_id),
        "currentSwipeId": lambda e: _num(e.current_swipe_id),
        "allChatRange": _range,
    }
    for name, fn in entries.items():
        registry.register_value(name, fn, category="chat", description=f"Chat statistic {name}.")
