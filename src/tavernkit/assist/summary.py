"""The rolling summary of a chat, made through ``generate_task`` (SillyTavern's Summarize
with the main API; the pure rules are :mod:`tavernkit.memory.summary`).

:func:`summarize` runs after a reply (the facade's chat service calls it when the owner's
``Settings.memory.summary.source`` is ``"main"``): when :func:`~tavernkit.memory.summary.
summary_due` says so, a Raw builder (``prompt_builder`` 1 or 2) asks
``generate_task([system: prompt, user: the new messages], include_character_card=False)``;
the Classic builder (0) asks the same task with the character card and the chat's world info,
the summary prompt as the last system message after the new messages. The reply is stored in
``extra.memory`` of the message SillyTavern stores it on, and thrown away when the chat
changed meanwhile (a message added or removed). :func:`set_summary` edits the current
summary (SillyTavern's summary box: the second-to-last message); :func:`current_summary`
reads it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tavernkit.context import TavernContext
from tavernkit.errors import MemoryConfigError
from tavernkit.memory.summary import (
    latest_summary,
    raw_summary_request,
    summary_due,
    summary_target,
    summary_task_prompt,
)
from tavernkit.models.chat import Message
from tavernkit.models.memory import SummarySettings
from tavernkit.prompt.from_chat_state import prompt_state_from_chat_state
from tavernkit.prompt.macros import macro_substitute
from tavernkit.runtime import Runtime
from tavernkit.text.tokens import ByteEstimateTokenizer

__all__ = ["SummaryUpdate", "current_summary", "set_summary", "summarize"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SummaryUpdate:
    """A summary stored: its text and the index of the message holding it."""

    text: str
    message_index: int


async def _messages(runtime: Runtime, chat_id: str) -> tuple[list[str], list[Message]]:
    stored = await runtime.store.load_chat(chat_id, owner=runtime.owner)
    ids = [m.id for m in stored.messages]
    return ids, [Message.model_validate(m.data) for m in stored.messages]


def _classic_messages(messages: Sequence[Message], start: int, prompt: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages[start:]:
        if message.is_system or not message.text:
            continue
        role = "user" if message.is_user else "assistant"
        out.append({"role": role, "content": message.text})
    out.append({"role": "system", "content": prompt})
    return out


async def summarize(
    context: TavernContext, *, force: bool = False, settings: SummarySettings | None = None
) -> SummaryUpdate | None:
    """Make and store a new summary of the context's chat when one is due (always with
    ``force``, SillyTavern's "Summarize now"); None when nothing was stored."""
    runtime = context.runtime
    chat_id = context.chat_id
    if chat_id is None:
        raise MemoryConfigError("summarize needs a context with a chat")
    if settings is None:
        settings = (await runtime.settings()).memory.summary
    if settings.source != "main" and not force:
        return None
    ids, messages = await _messages(runtime, chat_id)
    if not messages or not (force or summary_due(messages, settings)):
        return None
    state = await context.chat_state()
    substitute = macro_substitute(prompt_state_from_chat_state(state), compat=state.compat)
    last_used = -1
    response = settings.override_response_length or state.settings.prompt.amount_gen
    if settings.prompt_builder in (1, 2):
        request = raw_summary_request(
            messages,
            settings,
            substitute,
            count_tokens=ByteEstimateTokenizer().count,
            max_prompt_tokens=state.settings.prompt.max_context - response,
        )
        if request is None:
            return None
        last_used = request.last_used
        result = await context.generate_task(
            request.messages(), include_character_card=False, substitute_macros=False
        )
    else:
        prompt = summary_task_prompt(settings, substitute)
        if not prompt:
            return None
        start = max(0, min(len(messages) - 1, _latest_index(messages) + 1))
        result = await context.generate_task(
            _classic_messages(messages, start, prompt),
            include_character_card=True,
            world_info_source="chat",
            substitute_macros=False,
        )
    text = result.assistant_text.strip()
    if not text:
        return None
    now_ids, now = await _messages(runtime, chat_id)
    if now_ids != ids:
        log.info("summary of chat %s dropped: the chat changed while it was made", chat_id)
        return None
    target = summary_target(now, settings, last_used)
    message = now[target]
    message.extra.memory = text
    await runtime.store.update_message(ids[target], message, owner=runtime.owner)
    return SummaryUpdate(text, target)


def _latest_index(messages: Sequence[Message]) -> int:
    for index in range(len(messages) - 2, -1, -1):
        if messages[index].extra.memory:
            return index
    return -1


async def current_summary(runtime: Runtime, chat_id: str) -> str:
    """The summary the next turn injects (``""``: none)."""
    _, messages = await _messages(runtime, chat_id)
    return latest_summary(messages)


async def set_summary(runtime: Runtime, chat_id: str, text: str) -> int:
    """Edit the summary: ``text`` stored on the second-to-last message (SillyTavern's summary
    box; the next turn injects it); returns that message's index."""
    ids, messages = await _messages(runtime, chat_id)
    if len(messages) < 2:
        raise MemoryConfigError(
            f"chat {chat_id} has {len(messages)} message(s): a summary is kept on the "
            "second-to-last message, so it needs at least two"
        )
    target = len(messages) - 2
    message = messages[target]
    message.extra.memory = text
    await runtime.store.update_message(ids[target], message, owner=runtime.owner)
    return target
