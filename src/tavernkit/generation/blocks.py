"""A turn's prompt as blocks the fitting may trim, and an adapter's own fitting: what the plan
(a :class:`~tavernkit.generation.plan.PlanEntry`'s ``fitter``) and the attempt's prompt
(:mod:`tavernkit.generation.attempt.chat_prompt`) share, below both."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tavernkit.providers.profiles import ModelProfile
from tavernkit.providers.request import ChatMessage

__all__ = ["Fitter", "TurnBlock"]


@dataclass(frozen=True, slots=True)
class TurnBlock:
    """One message of the turn's prompt and what trimming may do with it.

    ``history`` blocks may be dropped (oldest first); ``protected`` ones never (the trigger
    message); ``requires_tool_calling`` ones only make sense to a model with tools.
    """

    message: ChatMessage
    history: bool = False
    protected: bool = False
    requires_tool_calling: bool = False


class Fitter(Protocol):
    """An adapter's own fitting (NovelAI resolves its window from the key's tier and counts
    the final rendered prompt itself); it receives the untrimmed blocks."""

    def __call__(
        self, blocks: Sequence[TurnBlock], budget: int, profile: ModelProfile
    ) -> Sequence[TurnBlock]: ...
