"""The rolling summary (SillyTavern's Summarize extension, reference §3), pure parts.

A summary lives in ``message.extra.memory`` of one chat message, so it is saved, exported and
imported with the chat. The current summary is the newest one, the very last message left
out (:func:`latest_summary`). It is injected as the ``1_memory`` extension prompt through
``template`` (``{{summary}}``) at ``position``/``depth``/``role`` (:func:`summary_prompt`).

After each reply :func:`summary_due` decides whether a new one is made: never with
``prompt_interval`` 0 (so the words trigger works only with a non-zero interval), not while
the chat is shorter than the interval, else when the messages since the last summary reach
the interval or their ASCII words reach ``prompt_force_words``. Raw builders summarise only
the new messages (:func:`raw_summary_request`); the result is stored on the last message
they used, a Classic summary on the second-to-last message (:func:`summary_target`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tavernkit.models.chat import Message
from tavernkit.models.memory import SummarySettings
from tavernkit.prompt.assembled import AssembledText
from tavernkit.prompt.raw_prompt import raw_text_prompt
from tavernkit.prompt.state import ExtensionPosition, ExtensionPrompt, PromptState, Substitute

__all__ = [
    "MEMORY_KEY",
    "RawSummaryRequest",
    "latest_summary",
    "latest_summary_index",
    "raw_summary_request",
    "summary_due",
    "summary_prompt",
    "summary_target",
    "summary_task_prompt",
]

#: SillyTavern's extension prompt key of the summary
MEMORY_KEY = "1_memory"
_WORDS = re.compile(r"\b\w+\b", re.ASCII)
#: the Raw builder's token padding (``getRawSummaryPrompt``)
RAW_PADDING = 64


def latest_summary_index(messages: Sequence[Message]) -> int:
    """The index of the newest message holding a summary, the last message left out; -1."""
    for index in range(len(messages) - 2, -1, -1):
        if messages[index].extra.memory:
            return index
    return -1


def latest_summary(messages: Sequence[Message]) -> str:
    """``getLatestMemoryFromChat``: the current summary, ``""`` when there is none."""
    index = latest_summary_index(messages)
    memory = messages[index].extra.memory if index >= 0 else None
    return memory or ""


def summary_prompt(
    summary: str, settings: SummarySettings, substitute: Callable[[str], str]
) -> ExtensionPrompt | None:
    """The ``1_memory`` extension prompt for ``summary`` (None when there is nothing to say)."""
    text = summary.strip()
    if not text:
        return None
    if settings.template:
        parts = settings.template.split("{{summary}}")
        value = text.join(substitute(part) for part in parts)
    else:
        value = f"Summary: {text}"
    position = settings.position
    if position == ExtensionPosition.NONE:
        return ExtensionPrompt(value, ExtensionPosition.NONE, settings.depth, settings.role)
    return ExtensionPrompt(value, position, settings.depth, settings.role, scan=settings.scan)


def summary_due(messages: Sequence[Message], settings: SummarySettings) -> bool:
    """Whether a summary is made now (``messages``: the chat after the reply)."""
    interval = settings.prompt_interval
    if not settings.active or interval <= 0 or not messages or len(messages) < interval:
        return False
    count = words = 0
    for message in reversed(messages):
        if message.extra.memory:
            break
        count += 1
        words += len(_WORDS.findall(message.text))
    return count >= interval or (
        settings.prompt_force_words > 0 and words >= settings.prompt_force_words
    )


def summary_task_prompt(settings: SummarySettings, substitute: Callable[[str], str]) -> str:
    """The summary prompt with ``{{words}}`` and the other macros resolved."""
    return substitute(settings.prompt.replace("{{words}}", str(settings.prompt_words)))


@dataclass(frozen=True, slots=True)
class RawSummaryRequest:
    """A Raw builder's request: system ``prompt``, user ``text``; ``last_used`` is the index
    of the last message in it (where the summary is stored). It is sent as SillyTavern's
    ``generateRaw`` sends it: :meth:`messages` on a chat-completion API, :meth:`text_prompt`
    (the instruct/context-formatted prompt) on a text-completion one."""

    prompt: str
    text: str
    last_used: int

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.prompt}, {"role": "user", "content": self.text}]

    def text_prompt(self, state: PromptState, substitute: Substitute) -> AssembledText:
        """The text-completion prompt and stop strings, with ``state``'s instruct and context
        templates (``substitute`` resolves their sequences' macros)."""
        return raw_text_prompt(state, self.text, substitute, system_prompt=self.prompt)


def raw_summary_request(
    messages: Sequence[Message],
    settings: SummarySettings,
    substitute: Callable[[str], str],
    *,
    count_tokens: Callable[[str], int],
    max_prompt_tokens: int,
) -> RawSummaryRequest | None:
    """``getRawSummaryPrompt``: the messages after the current summary (the last message
    never), ``Name:\\ntext`` each, while the prompt fits ``max_prompt_tokens`` (64 tokens of
    padding) and up to ``max_messages_per_request``; None when none fits."""
    prompt = summary_task_prompt(settings, substitute)
    if not prompt:
        return None
    previous = latest_summary(messages)
    start = latest_summary_index(messages) + 1
    buffer: list[str] = []
    last_used = -1
    for index in range(start, len(messages) - 1):
        message = messages[index]
        if message.is_system or not message.text:
            continue
        buffer.append(f"{message.name}:\n{message.text}")
        whole = "\n\n".join([prompt, previous, *buffer]).strip()
        if count_tokens(whole) + RAW_PADDING > max_prompt_tokens:
            buffer.pop()
            break
        last_used = index
        if 0 < settings.max_messages_per_request <= len(buffer):
            break
    if not buffer:
        return None
    text = "\n\n".join(x for x in [previous, *buffer] if x).strip()
    return RawSummaryRequest(prompt, substitute(text), last_used)


def summary_target(messages: Sequence[Message], settings: SummarySettings, last_used: int) -> int:
    """Where a new summary is stored: the last message a Raw request used, else the
    second-to-last message of the chat."""
    if settings.prompt_builder in (1, 2) and last_used >= 0:
        return last_used
    return max(len(messages) - 2, 0)
