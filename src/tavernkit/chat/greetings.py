"""The first message of a new chat, as SillyTavern writes it (``getFirstMessage``).

The card's ``first_mes`` and its ``alternate_greetings`` become the swipes of message 0, with
``first_mes`` shown; when ``first_mes`` is empty the first alternate greeting takes its place.
Macros are evaluated once, when the chat is created (``{{user}}`` becomes the persona's name
of that moment), exactly like SillyTavern, whose stored greetings hold the substituted text.
A card with no greeting at all starts an empty chat.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from tavernkit.models.chat import Message, MessageExtra

__all__ = ["chat_name", "greeting_message", "iso_timestamp"]


def iso_timestamp(now: datetime) -> str:
    """SillyTavern's ``getMessageTimeStamp()``: ISO 8601 in UTC with milliseconds and ``Z``."""
    return now.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def chat_name(character: str, now: datetime) -> str:
    """``"<character> - 2025-01-31@14h05m09s"``: SillyTavern's name for a new chat file."""
    return f"{character} - {now.strftime('%Y-%m-%d@%Hh%Mm%Ss')}"


def greeting_message(
    char_name: str,
    first_mes: str,
    alternate_greetings: list[str],
    *,
    substitute: Callable[[str], str],
    send_date: str,
    regex: Callable[[str], str] | None = None,
) -> Message | None:
    """Message 0 of a new chat, or ``None`` when the card has no greeting. ``regex`` is the
    plain AI_OUTPUT regex pass SillyTavern runs on each greeting before its macros."""
    scripts = regex if regex is not None else (lambda text: text)
    swipes = [
        substitute(scripts(first_mes or "")),
        *(substitute(scripts(g)) for g in alternate_greetings),
    ]
    if not swipes[0] and len(swipes) > 1:
        swipes.pop(0)
    if not swipes[0]:
        return None
    fields: dict[str, Any] = {
        "name": char_name,
        "is_user": False,
        "is_system": False,
        "send_date": send_date,
        "mes": swipes[0],
        "extra": MessageExtra(),
    }
    if len(swipes) > 1:
        fields["swipe_id"] = 0
        fields["swipes"] = swipes
        fields["swipe_info"] = []
    return Message.model_validate(fields)
