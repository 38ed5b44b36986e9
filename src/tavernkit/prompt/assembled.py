"""What the prompt builders return: :class:`AssembledChat` and :class:`AssembledText`.

A chat prompt is a list of :class:`PromptBlock` values, each one message plus where it came
from (preset entry, chat message, example, injection...) and its token count, so the turn
runner can drop tool-only blocks for a model without tools and re-trim without rebuilding, and
the prompt inspector can show which block came from where. These are the builders' own values
(messages as plain OpenAI-shaped dicts), not requests: the one request family is
:mod:`tavernkit.providers.request` (``PromptRequest``), which
:func:`~tavernkit.prompt.convert.to_provider_request` makes from them with each message
carrying its block's label, and which both the prompt inspector and the provider adapters read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "Assembled",
    "AssembledChat",
    "AssembledText",
    "BlockSource",
    "InspectionRow",
    "PromptBlock",
    "PromptInspection",
]

#: Where a block came from.
BlockSource = Literal[
    "preset",  # a prompt-manager entry (content prompt or filled marker)
    "history",  # a chat message
    "example",  # example dialogue
    "injection",  # an in-chat injection (preset in-chat prompts, extension prompts, WI depth)
    "extension",  # a relative extension prompt (Author's Note in prompt, summaries...)
    "control",  # new-chat header, nudges, quiet/impersonate prompts, prefills
    "tool",  # tool calls and tool results
]


@dataclass(frozen=True, slots=True)
class PromptBlock:
    """One message of a chat prompt and its provenance."""

    message: dict[str, Any]
    identifier: str
    source: BlockSource
    tokens: int
    #: Index of the chat message it renders, for history and tool blocks.
    message_index: int | None = None
    #: The block only makes sense to a model that supports tool calling.
    requires_tool_calling: bool = False
    #: Lorebook entries that produced this block (``"<world>.<uid>"``), when known.
    entries: tuple[str, ...] = ()

    @property
    def role(self) -> str:
        return str(self.message.get("role", ""))


@dataclass(frozen=True, slots=True)
class InspectionRow:
    identifier: str
    source: BlockSource
    role: str
    tokens: int
    message_index: int | None
    entries: tuple[str, ...]
    preview: str


@dataclass(frozen=True, slots=True)
class PromptInspection:
    """Which block came from which preset entry, lorebook entry or message, with its tokens."""

    rows: tuple[InspectionRow, ...]
    total_tokens: int
    budget: int
    activated_entries: tuple[str, ...] = ()

    def by_identifier(self) -> dict[str, int]:
        """Tokens per top-level identifier (``chatHistory-12`` counts under ``chatHistory``)."""
        out: dict[str, int] = {}
        for row in self.rows:
            key = row.identifier.split("-")[0].split(" ")[0]
            out[key] = out.get(key, 0) + row.tokens
        return out


@dataclass(frozen=True, slots=True)
class AssembledChat:
    """A chat-completion request's prompt part."""

    blocks: tuple[PromptBlock, ...]
    #: The context budget the prompt was trimmed to (max context minus the response).
    budget: int = 0
    kind: str = "normal"
    activated_entries: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [dict(b.message) for b in self.blocks]

    @property
    def token_count(self) -> int:
        return sum(b.tokens for b in self.blocks)

    def without_tool_blocks(self) -> AssembledChat:
        """The same prompt for a model without tool calling (tool-only blocks dropped)."""
        kept = tuple(b for b in self.blocks if not b.requires_tool_calling)
        return AssembledChat(kept, self.budget, self.kind, self.activated_entries, self.warnings)

    def inspect(self) -> PromptInspection:
        rows = tuple(
            InspectionRow(
                identifier=b.identifier,
                source=b.source,
                role=b.role,
                tokens=b.tokens,
                message_index=b.message_index,
                entries=b.entries,
                preview=_preview(b.message.get("content")),
            )
            for b in self.blocks
        )
        return PromptInspection(rows, self.token_count, self.budget, self.activated_entries)


@dataclass(frozen=True, slots=True)
class AssembledText:
    """A text-completion request's prompt part: the prompt string and its stop strings."""

    prompt: str
    stop: list[str] = field(default_factory=list)
    kind: str = "normal"
    budget: int = 0
    token_count: int = 0
    activated_entries: tuple[str, ...] = ()
    #: Pieces of the prompt in order (story string, examples, messages...), for inspection.
    sections: tuple[tuple[str, str], ...] = ()
    #: The prompt as labelled pieces, ``(kind, text)``, joining to ``prompt`` exactly: one per
    #: chat message (``history``) or in-chat injection (``injection``), the rest whole; ``()``
    #: when the builder could not split it.
    pieces: tuple[tuple[str, str], ...] = ()


Assembled = AssembledChat | AssembledText


def _preview(content: Any, limit: int = 80) -> str:
    if isinstance(content, str):
        text = content
    elif isinstance(content, Sequence):
        text = " ".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("text")
        )
    else:
        text = ""
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
