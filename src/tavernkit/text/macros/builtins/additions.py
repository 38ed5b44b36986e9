"""Macros the product brief names that SillyTavern spells differently or lacks.

They exist only in compat "default": in "st-1.18" SillyTavern leaves these names raw, and so
does tavernkit. Where SillyTavern already gives a spelling a meaning (``{{random::a::b}}``
picks from a list, not a number range), SillyTavern's meaning is kept in both modes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from tavernkit.text.macros.env import MacroEnv
from tavernkit.text.macros.registry import MacroCall, MacroRegistry
from tavernkit.text.macros.timefmt import format_moment

__all__ = ["register"]


def _uuid(call: MacroCall) -> str:
    rng = call.env.random_source()
    bits = 0
    for _ in range(8):
        bits = (bits << 16) | int(rng.random() * 65536)
    return str(uuid.UUID(int=bits, version=4))


def _datetime(call: MacroCall) -> str:
    env = call.env
    return format_moment(env.clock().astimezone(env.tz), "LLL")


def register(registry: MacroRegistry) -> None:
    pure: dict[str, tuple[Callable[[MacroEnv], str], str]] = {
        "messageCount": (lambda e: str(e.message_count), "Number of messages in the chat."),
        "chatId": (lambda e: e.chat_id or "", "The chat's id."),
        "provider": (lambda e: e.provider, "The API provider in use."),
        "nl": (lambda e: "\n", "A newline."),
        "user_description": (lambda e: e.persona, "The persona's description."),
        "char_description": (lambda e: e.description, "The character's description."),
        "system_prompt": (lambda e: e.char_prompt, "The card's system prompt."),
        "post_history_instructions": (
            lambda e: e.char_instruction,
            "The card's post-history instructions.",
        ),
        "jailbreak": (lambda e: e.char_jailbreak or e.char_instruction, "Jailbreak prompt."),
    }
    for name, (fn, help_text) in pure.items():
        registry.register_value(
            name, fn, availability="default", category="additions", description=help_text
        )
    registry.register(
        "uuid",
        _uuid,
        availability="default",
        category="additions",
        description="A random UUID (version 4) from the injected RNG.",
    )
    registry.register(
        "datetime",
        _datetime,
        availability="default",
        category="additions",
        description="Date and time in the user's locale format.",
    )
