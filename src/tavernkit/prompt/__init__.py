"""Prompt assembly: chat-completion message lists and text-completion prompt strings built
exactly as SillyTavern 1.18 builds them (see ``ARCHITECTURE.md``, layer "prompt").

World info's outputs are placed by :mod:`.extensions` (the positions keyed like SillyTavern's
extension prompts: before/after the card, author's note top/bottom, outlets, ``@depth``) and
in-chat by :func:`.chat_history.inject_prompts`; which output an entry's ``position`` selects
is :mod:`tavernkit.worldinfo.assemble`. :mod:`.convert` gives each provider message its block's
label, which the turn runner's attempts read (:mod:`tavernkit.generation.attempt`)."""

from __future__ import annotations

from tavernkit.prompt.assembled import (
    Assembled,
    AssembledChat,
    AssembledText,
    PromptBlock,
    PromptInspection,
)
from tavernkit.prompt.chat_completion import build_chat_completion
from tavernkit.prompt.macros import MacroSubstitute, macro_substitute
from tavernkit.prompt.pipeline import PreparedPrompt, PromptSession, PromptTarget, begin, prepare
from tavernkit.prompt.state import (
    AuthorsNote,
    ExtensionPrompt,
    PromptState,
    Substitute,
    TokenBudgetExceeded,
)
from tavernkit.prompt.text_completion import build_text_completion

__all__ = [
    "Assembled",
    "AssembledChat",
    "AssembledText",
    "AuthorsNote",
    "ExtensionPrompt",
    "MacroSubstitute",
    "PreparedPrompt",
    "PromptBlock",
    "PromptInspection",
    "PromptSession",
    "PromptState",
    "PromptTarget",
    "Substitute",
    "TokenBudgetExceeded",
    "begin",
    "build_chat_completion",
    "build_text_completion",
    "macro_substitute",
    "prepare",
]
