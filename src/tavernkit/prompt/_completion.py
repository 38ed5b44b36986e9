"""The token-budgeted message list of a chat-completion build (SillyTavern's ``ChatCompletion``).

Collections sit in a sparse list indexed by the prompt's place in the prompt collection, so the
final order is the preset's order whatever the order they were added in; ``push`` appends after
the highest index. Every add or insert spends budget; a mandatory one that does not fit raises
:class:`TokenBudgetExceeded`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tavernkit.prompt.assembled import BlockSource, PromptBlock
from tavernkit.prompt.state import TokenBudgetExceeded

__all__ = ["Msg", "MsgCollection", "PromptSlots"]


@dataclass(slots=True)
class Msg:
    role: str
    content: Any
    identifier: str
    tokens: int
    source: BlockSource = "preset"
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    reasoning: str | None = None
    signature: str | None = None
    message_index: int | None = None
    injected: bool = False
    requires_tool_calling: bool = False
    entries: tuple[str, ...] = ()

    def has_payload(self) -> bool:
        return bool(self.content) or bool(self.tool_calls)

    def to_block(self) -> PromptBlock:
        message: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name:
            message["name"] = self.name
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        if self.role == "tool" and self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        if self.signature:
            message["signature"] = self.signature
        if self.reasoning:
            message["reasoning"] = self.reasoning
        return PromptBlock(
            message,
            self.identifier,
            self.source,
            self.tokens,
            self.message_index,
            self.requires_tool_calling,
            self.entries,
        )


@dataclass(slots=True)
class MsgCollection:
    identifier: str
    items: list[Msg] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(m.tokens for m in self.items)


class PromptSlots:
    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.total_budget = budget
        self._slots: dict[int, MsgCollection] = {}

    # --- budget ---

    def reserve(self, tokens: int) -> None:
        self.budget -= tokens

    def free(self, tokens: int) -> None:
        self.budget += tokens

    def can_afford(self, tokens: int) -> bool:
        return self.budget - tokens >= 0

    def _check(self, tokens: int, identifier: str) -> None:
        if not self.can_afford(tokens):
            raise TokenBudgetExceeded(identifier, tokens, self.budget)

    # --- collections ---

    def add(self, collection: MsgCollection, index: int | None = None) -> None:
        self._check(collection.tokens, collection.identifier)
        if index is None or index == -1:
            index = max(self._slots, default=-1) + 1
        self._slots[index] = collection
        self.budget -= collection.tokens

    def has(self, identifier: str) -> bool:
        return any(c.identifier == identifier for c in self._slots.values())

    def find(self, identifier: str) -> MsgCollection | None:
        for collection in self._slots.values():
            if collection.identifier == identifier:
                return collection
        return None

    def insert(self, msg: Msg, identifier: str, position: str = "end") -> None:
        collection = self.find(identifier)
        if collection is None:
            raise KeyError(identifier)
        self._check(msg.tokens, msg.identifier)
        if msg.has_payload():
            if position == "start":
                collection.items.insert(0, msg)
            else:
                collection.items.append(msg)
            self.budget -= msg.tokens

    def insert_at_start(self, msg: Msg, identifier: str) -> None:
        self.insert(msg, identifier, "start")

    def insert_at_end(self, msg: Msg, identifier: str) -> None:
        self.insert(msg, identifier, "end")

    def remove_last_from(self, identifier: str) -> None:
        collection = self.find(identifier)
        if collection is not None and collection.items:
            removed = collection.items.pop()
            self.budget += removed.tokens

    # --- output ---

    def iter_messages(self) -> Iterator[Msg]:
        for index in sorted(self._slots):
            yield from self._slots[index].items

    def flatten(self) -> list[Msg]:
        return list(self.iter_messages())

    def blocks(self, messages: Sequence[Msg] | None = None) -> tuple[PromptBlock, ...]:
        source = self.flatten() if messages is None else messages
        return tuple(m.to_block() for m in source if m.has_payload())
