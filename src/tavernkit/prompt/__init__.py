"""Prompt assembly: chat-completion message lists and text-completion prompt strings built
exactly as SillyTavern 1.18 builds them (see ``ARCHITECTURE.md``, layer "prompt")."""

from __future__ import annotations

from tavernkit.prompt.chat_completion import build_chat_completion
from tavernkit.prompt.macros import MacroSubstitute, macro_substitute
from tavernkit.prompt.request import (
    ChatPrompt,
    PromptBlock,
    PromptInspection,
    PromptRequest,
    TextPrompt,
)
from tavernkit.prompt.state import (
    AuthorsNote,
    ExtensionPrompt,
    PromptState,
    Substitute,
    TokenBudgetExceeded,
)
from tavernkit.prompt.text_completion import build_text_completion

__all__ = [
    "AuthorsNote",
    "ChatPrompt",
    "ExtensionPrompt",
    "MacroSubstitute",
    "PromptBlock",
    "PromptInspection",
    "PromptRequest",
    "PromptState",
    "Substitute",
    "TextPrompt",
    "TokenBudgetExceeded",
    "build_chat_completion",
    "build_text_completion",
    "macro_substitute",
]
