"""What stored messages show: their text and reasoning through the display-only regex
scripts (``markdownOnly``), at each message's display depth.

A display-only script never changes what is stored; the web UI and the terminal show
:attr:`Shown.text` instead of the stored text when it differs. The depth of a message is its
place from the end among the chat's messages that are not hidden (the newest 0), counted over
the whole chat (:func:`shown_messages` reads the messages after the given ones only when a
display script has a depth window).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tavernkit.chat.regex_text import RegexText, state_regex_text
from tavernkit.jscompat import js_to_number, js_truthy
from tavernkit.models.chat import Message
from tavernkit.models.settings import Settings
from tavernkit.models.state import ChatState
from tavernkit.store.chat_state import load_chat_state
from tavernkit.store.chat_types import StoredMessage
from tavernkit.store.chat_window import windowed
from tavernkit.store.protocol import Store

__all__ = ["Shown", "may_have_scripts", "shown_messages"]


@dataclass(frozen=True, slots=True)
class Shown:
    """A message's shown text and reasoning, each ``None`` when it is the stored one."""

    text: str | None = None
    reasoning: str | None = None


def may_have_scripts(settings: object) -> bool:
    """Whether the owner's settings can let any regex script run (global scripts, or an
    allowed card or preset): one settings read decides that a chat has nothing to do."""
    if not isinstance(settings, Settings):
        return False
    regex = settings.regex
    return regex.enabled and bool(
        regex.scripts or regex.allowed_characters or regex.allowed_presets
    )


def _depth_window(scripts: RegexText) -> bool:
    """Whether some display-only script has a depth window (else depths change nothing)."""
    for view in scripts.scripts.views:
        if not js_truthy(view.get("markdownOnly")):
            continue
        for key in ("minDepth", "maxDepth"):
            value = view.get(key)
            if value is not None and not math.isnan(js_to_number(value)):
                return True
    return False


async def shown_messages(
    store: Store, chat_id: str, rows: Sequence[StoredMessage], *, owner: str
) -> dict[int, Shown]:
    """What each of ``rows`` (messages of the chat, by position) shows where the display-only
    scripts change it; messages they leave alone are not in the result."""
    if not rows or not may_have_scripts(await store.get_settings(owner=owner)):
        return {}

    async def read(window: int) -> tuple[ChatState, RegexText | None]:
        state = await load_chat_state(store, owner=owner, chat_id=chat_id, window=window)
        return state, state_regex_text(state)

    state, scripts = await windowed(chat_id, read)
    if scripts is None or not scripts.may_change_display():
        return {}
    ordered = sorted(rows, key=lambda r: r.position)
    depths: dict[int, int | None] = {}
    if _depth_window(scripts):
        total = len(state.messages)
        last = ordered[-1].position
        after = (
            await store.load_message_range(chat_id, start=last + 1, stop=total, owner=owner)
            if last + 1 < total
            else []
        )
        visible = sum(1 for r in after if not r.data.get("is_system"))
        for row in reversed(ordered):
            if row.data.get("is_system"):
                depths[row.position] = None
            else:
                depths[row.position] = visible
                visible += 1
    out: dict[int, Shown] = {}
    for row in ordered:
        message = Message.model_validate(row.data)
        depth = depths.get(row.position)
        text = scripts.display(message, depth)
        reasoning = message.extra.reasoning or ""
        shown_reasoning = scripts.display_reasoning(reasoning) if reasoning else reasoning
        shown = Shown(
            text if text != message.text else None,
            shown_reasoning if shown_reasoning != reasoning else None,
        )
        if shown.text is not None or shown.reasoning is not None:
            out[row.position] = shown
    return out
