"""A chat-completion message's tokens as SillyTavern sums them (§2.6 of the behaviour
reference): the content, a per-message overhead, the role and the name, and a fixed count per
image; what :mod:`tavernkit.prompt.chat_completion` spends its budget by."""

from __future__ import annotations

import json
from typing import Any

from tavernkit.prompt._completion import Msg
from tavernkit.prompt.assembled import BlockSource
from tavernkit.prompt.chat_history import text_parts
from tavernkit.prompt.collection import Prompt
from tavernkit.text.tokens import Tokenizer

__all__ = ["TOKENS_PER_IMAGE", "TOKENS_PER_MESSAGE", "TOKENS_PER_NAME", "MessageTokens"]

#: Per-message overhead of OpenAI's chat format, as SillyTavern counts it (§2.6).
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
TOKENS_PER_IMAGE = 85


class MessageTokens:
    """Message token counts as SillyTavern sums them (§2.6). Roles and names are a handful of
    short strings counted for every message, so their counts are kept here for the build."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.count = tokenizer.count
        self._short: dict[str, int] = {}

    def short(self, text: str) -> int:
        tokens = self._short.get(text)
        if tokens is None:
            tokens = self._short[text] = self.count(text)
        return tokens

    def message(self, role: str, content: Any, name: str | None = None) -> int:
        if content.__class__ is str:
            if not content:
                return 0
            tokens = self.count(content)
        elif content is None or content == "" or content == []:
            return 0
        elif isinstance(content, str):
            tokens = self.count(content)
        else:
            tokens = self.count(text_parts(content))
            tokens += TOKENS_PER_IMAGE * sum(
                1 for p in content if isinstance(p, dict) and p.get("type") == "image_url"
            )
        tokens += TOKENS_PER_MESSAGE + self.short(role)
        if name:
            tokens += self.short(name) + TOKENS_PER_NAME
        return tokens

    def make(
        self,
        role: str,
        content: Any,
        identifier: str,
        # Positional too: the history walk calls this for every message it takes.
        source: BlockSource = "preset",
        name: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        tool_call_id: str | None = None,
        message_index: int | None = None,
        reasoning: str | None = None,
        signature: str | None = None,
        entries: tuple[str, ...] = (),
    ) -> Msg:
        if tool_calls:
            tokens = TOKENS_PER_MESSAGE + self.short(role) + self.count(json.dumps(tool_calls))
        else:
            tokens = self.message(role, content, name)
        # Positional: this runs for every message of the history walk.
        return Msg(
            role,
            content,
            identifier,
            tokens,
            source,
            name,
            tool_calls,
            tool_call_id,
            reasoning,
            signature,
            message_index,
            False,
            source == "tool",
            entries,
        )

    def from_prompt(self, prompt: Prompt, source: BlockSource = "preset") -> Msg:
        return self.make(prompt.role, prompt.content, prompt.identifier, source=source)
