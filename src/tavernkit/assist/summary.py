"""The rolling summary of a chat (SillyTavern's Summarize with the main API; the pure rules
are :mod:`tavernkit.memory.summary`), made through the plugin API's background generations.

:func:`summarize` runs after a reply (the facade's chat service calls it when the owner's
``Settings.memory.summary.source`` is ``"main"``): when :func:`~tavernkit.memory.summary.
summary_due` says so, a Raw builder (``prompt_builder`` 1 or 2) asks ``generate_raw`` with
the summary prompt as system prompt and the new messages as the prompt (SillyTavern's
``generateRaw``: no card, no world info); the Classic builder (0) asks
``generate_quiet_prompt`` with the summary prompt (SillyTavern's ``generateQuietPrompt``: the
whole character prompt, the summary prompt last). Both are the very calls SillyTavern's
extension makes, so the summary request equals SillyTavern's (the memory goldens check the
prompts); ``generate_task`` would wrap them in its own task envelope. The reply is stored in
``extra.memory`` of the message SillyTavern stores it on, and thrown away when the chat
changed meanwhile (a message added or removed). :func:`set_summary` edits the current
summary (SillyTavern's summary box: the second-to-last message); :func:`current_summary`
reads it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

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
    length = settings.override_response_length or None
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
        reply = await context.generate_raw(
            request.text, system_prompt=request.prompt, response_length=length
        )
    else:
        prompt = summary_task_prompt(settings, substitute)
        if not prompt:
            return None
        reply = await context.generate_quiet_prompt(
            prompt, skip_wian=settings.skip_wian, response_length=length
        )
    text = reply.strip()
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
