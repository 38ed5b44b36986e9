"""Reasoning in prompts (SillyTavern's ``reasoning.js``): parse, stream-parse, add back.

- :func:`parse_reasoning` splits ``<think>…</think>`` style blocks off a reply, strictly (the
  block must open the reply) or anywhere (lax).
- :class:`ReasoningStreamParser` does the same while a reply streams in: once the text starts
  with the prefix everything goes to the reasoning until the suffix arrives.
- :func:`add_reasoning_to_messages` writes the stored reasoning of the newest messages back in
  front of their text for the prompt (``add_to_prompts``), at most ``max_additions`` times.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tavernkit.jscompat import js_trim
from tavernkit.models.chat import LEGACY_REASONING_PLACEHOLDER, Message
from tavernkit.models.templates import ReasoningTemplate
from tavernkit.prompt.state import PromptState, Substitute

__all__ = [
    "ParsedReasoning",
    "ReasoningStreamParser",
    "add_reasoning_to_messages",
    "format_reasoning",
    "parse_reasoning",
]


@dataclass(frozen=True, slots=True)
class ParsedReasoning:
    reasoning: str
    content: str


def parse_reasoning(
    text: str,
    template: ReasoningTemplate | None = None,
    *,
    strict: bool = True,
    trim: bool = True,
) -> ParsedReasoning | None:
    """``parseReasoningFromString``: the first ``prefix…suffix`` block and the rest.

    Strict: the block must start the text (after whitespace). Returns ``None`` when the template
    has no prefix or suffix, and empty reasoning with the text unchanged when nothing matches.
    ``trim`` is SillyTavern's ``trim_spaces`` (on by default).
    """
    template = template if template is not None else ReasoningTemplate()
    if not template.prefix or not template.suffix:
        return None
    pattern = re.compile(
        (r"^\s*?" if strict else "")
        + re.escape(template.prefix)
        + "(.*?)"
        + re.escape(template.suffix),
        re.DOTALL,
    )
    match = pattern.search(text)
    if match is None:
        return ParsedReasoning("", text)
    reasoning = match.group(1)
    content = text[: match.start()] + text[match.end() :]
    if trim:
        reasoning, content = js_trim(reasoning), js_trim(content)
    return ParsedReasoning(reasoning, content)


class ReasoningStreamParser:
    """Auto-parse of a streaming reply (``autoParseReasoningFromMessage``).

    Feed the whole text received so far to :meth:`update`; ``reasoning`` and ``content`` then
    hold the split. ``prefill`` is the incomplete reasoning a continued message already had
    (its prefix is then implied).
    """

    def __init__(self, template: ReasoningTemplate | None = None, *, prefill: str = "") -> None:
        self.template = template if template is not None else ReasoningTemplate()
        self.prefill = prefill
        self.reasoning = ""
        self.content = ""
        #: "none" (no block seen), "thinking" (inside the block) or "done".
        self.state = "none"

    def update(self, received: str) -> ParsedReasoning:
        prefix, suffix = self.template.prefix, self.template.suffix
        text = self.prefill + received
        if not prefix or not suffix:
            self.content = received
            return ParsedReasoning(self.reasoning, self.content)
        if self.state == "none" and not (text.startswith(prefix) and len(text) > len(prefix)):
            if prefix.startswith(text):
                self.content = ""  # could still become a prefix: show nothing yet
            else:
                self.content = received
            return ParsedReasoning(self.reasoning, self.content)
        body = text[len(prefix) :]
        end = body.find(suffix)
        if end < 0:
            self.state = "thinking"
            self.reasoning = body
            self.content = ""
        else:
            self.state = "done"
            self.reasoning = body[:end]
            self.content = body[end + len(suffix) :]
            self.content = self.content.lstrip("\n") if self.content.strip() else ""
        return ParsedReasoning(self.reasoning, self.content)


def format_reasoning(
    content: str,
    reasoning: str,
    template: ReasoningTemplate,
    substitute: Substitute,
    *,
    is_prefix: bool = False,
) -> str:
    prefix = substitute(template.prefix or "")
    separator = substitute(template.separator or "")
    suffix = substitute(template.suffix or "")
    if is_prefix and not content:
        return f"{prefix}{reasoning}"
    return f"{prefix}{reasoning}{suffix}{separator}{content}"


def add_reasoning_to_messages(
    state: PromptState,
    chat: Sequence[tuple[int, Message]],
    *,
    kind: str,
    substitute: Substitute,
    content_of: Callable[[int, Message], str] | None = None,
    reasoning_of: Callable[[str, int], str] | None = None,
) -> dict[int, str]:
    """The texts that change when reasoning is added to prompts, by chat index.

    Newest first: each message with stored reasoning gets ``prefix+reasoning+suffix+separator``
    in front, until ``max_additions`` are used. A continued message always gets its reasoning
    back (only ``prefix+reasoning`` when its text is still empty), so the model resumes inside
    the block. In a group turn only the drafted member's own messages carry their reasoning.
    ``content_of`` gives a message's prompt text (regex scripts applied; by chat index) and
    ``reasoning_of`` its reasoning's (by its depth: the newest message is 0, on ``continue``
    the continued one is -1).
    """
    settings = state.reasoning
    template = state.reasoning_template or ReasoningTemplate()
    enabled = settings is not None and settings.add_to_prompts
    limit = settings.max_additions if settings is not None else 1
    out: dict[int, str] = {}
    used = 0
    for position in range(len(chat) - 1, -1, -1):
        index, message = chat[position]
        if state.group is not None and message.name != state.char:
            continue  # another member's thoughts are not the speaker's to see
        is_prefix = kind == "continue" and position == len(chat) - 1
        reasoning = message.extra.reasoning or ""
        if reasoning and reasoning_of is not None and (is_prefix or (enabled and used < limit)):
            depth = len(chat) - position - (2 if kind == "continue" else 1)
            reasoning = reasoning_of(reasoning, depth)
        if (is_prefix or (enabled and used < limit)) and (
            reasoning and reasoning != LEGACY_REASONING_PLACEHOLDER
        ):
            used += 1
            content = content_of(index, message) if content_of is not None else message.text
            out[index] = format_reasoning(
                content, reasoning, template, substitute, is_prefix=is_prefix
            )
        if not enabled or used >= limit:
            break
    return out
