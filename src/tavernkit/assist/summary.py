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
reads it. Every read is a tail of the chat reaching back to the current summary
(:func:`_since_summary`), never the whole of a long chat.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tavernkit.context import TavernContext
from tavernkit.errors import MemoryConfigError
from tavernkit.memory.summary import (
    RawSummaryRequest,
    latest_summary,
    latest_summary_index,
    raw_summary_request,
    summary_due,
    summary_target,
    summary_task_prompt,
)
from tavernkit.models.chat import Message
from tavernkit.models.chat_window import OutsideWindow
from tavernkit.models.memory import SummarySettings
from tavernkit.prompt.from_chat_state import prompt_state_from_chat_state
from tavernkit.prompt.macros import macro_substitute
from tavernkit.runtime import Runtime
from tavernkit.store.chat_state import load_chat_state
from tavernkit.text.tokens import ByteEstimateTokenizer

__all__ = ["SummaryUpdate", "current_summary", "set_summary", "summarize"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SummaryUpdate:
    """A summary stored: its text and the index of the message holding it."""

    text: str
    message_index: int


#: the newest messages a summary read starts from; it grows this many times over while it
#: has not reached the current summary (a chat summarized as it goes reads little)
_FIRST_READ = 64
_GROWTH = 8


@dataclass(frozen=True, slots=True)
class _Tail:
    """The newest messages of a chat: their store ids, the chat position of the first, and
    whether they are the whole chat (``length`` messages in all)."""

    ids: list[str]
    messages: list[Message]
    offset: int
    length: int

    @property
    def complete(self) -> bool:
        return self.offset == 0


async def _tail(runtime: Runtime, chat_id: str, last: int) -> _Tail:
    window = await runtime.store.load_chat_window(chat_id, last=max(last, 1), owner=runtime.owner)
    tail = window.tail
    offset = tail[0].position if tail else 0
    messages = [Message.model_validate(m.data) for m in tail]
    return _Tail([m.id for m in tail], messages, offset, window.info.message_count)


async def _since_summary(
    runtime: Runtime, chat_id: str, first: int = _FIRST_READ, read: _Tail | None = None
) -> _Tail:
    """The newest messages reaching back to the one holding the current summary (the last
    message left out, as :func:`latest_summary_index` does), or the whole chat when none
    holds one: what every summary rule reads, at a cost that grows with the messages since
    the summary, not with the chat. ``read``: a tail of ``first`` messages already read."""
    size = first
    tail = read or await _tail(runtime, chat_id, size)
    while not tail.complete and latest_summary_index(tail.messages) < 0:
        size *= _GROWTH
        tail = await _tail(runtime, chat_id, size)
    return tail


async def _build(
    context: TavernContext, chat_id: str, messages: list[Message], settings: SummarySettings
) -> RawSummaryRequest | str | None:
    """The Raw builders' request, or the Classic builder's prompt (``None``: nothing to ask).
    Its macros read the chat's newest messages; one that reads further back is given the
    whole chat."""
    runtime = context.runtime
    for window in (_FIRST_READ, None):
        state = await load_chat_state(
            runtime.store, owner=runtime.owner, chat_id=chat_id, window=window
        )
        substitute = macro_substitute(prompt_state_from_chat_state(state), compat=state.compat)
        try:
            if settings.prompt_builder not in (1, 2):
                return summary_task_prompt(settings, substitute) or None
            response = settings.override_response_length or state.settings.prompt.amount_gen
            return raw_summary_request(
                messages,
                settings,
                substitute,
                count_tokens=ByteEstimateTokenizer().count,
                max_prompt_tokens=state.settings.prompt.max_context - response,
            )
        except OutsideWindow:
            continue
    raise AssertionError("the whole chat is never outside its window")


async def summarize(
    context: TavernContext, *, force: bool = False, settings: SummarySettings | None = None
) -> SummaryUpdate | None:
    """Make and store a new summary of the context's chat when one is due (always with
    ``force``, SillyTavern's "Summarize now"); None when nothing was stored. A summary is a
    side task: it runs on the utility profile when one is set."""
    context = context.for_side_tasks()
    runtime = context.runtime
    chat_id = context.chat_id
    if chat_id is None:
        raise MemoryConfigError("summarize needs a context with a chat")
    if settings is None:
        settings = (await runtime.settings()).memory.summary
    if settings.source != "main" and not force:
        return None
    # whether one is due reads at most ``prompt_interval`` messages back (exact on any tail
    # at least that long); what goes into one reads back to the current summary
    first = max(settings.prompt_interval + 1, _FIRST_READ)
    read = await _tail(runtime, chat_id, first)
    if not read.messages or not (force or summary_due(read.messages, settings)):
        return None
    read = await _since_summary(runtime, chat_id, first, read)
    messages = read.messages
    last_used = -1
    length = settings.override_response_length or None
    built = await _build(context, chat_id, messages, settings)
    if built is None:
        return None
    if isinstance(built, RawSummaryRequest):
        last_used = built.last_used
        reply = await context.generate_raw(
            built.text, system_prompt=built.prompt, response_length=length
        )
    else:
        reply = await context.generate_quiet_prompt(
            built, skip_wian=settings.skip_wian, response_length=length
        )
    text = reply.strip()
    if not text:
        return None
    now = await _tail(runtime, chat_id, len(read.ids))
    if now.ids != read.ids or now.length != read.length:
        log.info("summary of chat %s dropped: the chat changed while it was made", chat_id)
        return None
    target = summary_target(now.messages, settings, last_used)
    message = now.messages[target]
    message.extra.memory = text
    await runtime.store.update_message(now.ids[target], message, owner=runtime.owner)
    return SummaryUpdate(text, now.offset + target)


async def current_summary(runtime: Runtime, chat_id: str) -> str:
    """The summary the next turn injects (``""``: none)."""
    return latest_summary((await _since_summary(runtime, chat_id)).messages)


async def set_summary(runtime: Runtime, chat_id: str, text: str) -> int:
    """Edit the summary: ``text`` stored on the second-to-last message (SillyTavern's summary
    box; the next turn injects it); returns that message's index."""
    read = await _tail(runtime, chat_id, 2)
    if read.length < 2:
        raise MemoryConfigError(
            f"chat {chat_id} has {read.length} message(s): a summary is kept on the "
            "second-to-last message, so it needs at least two"
        )
    message = read.messages[0]
    message.extra.memory = text
    await runtime.store.update_message(read.ids[0], message, owner=runtime.owner)
    return read.length - 2
