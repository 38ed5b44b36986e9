"""``ChatState``: everything one turn reads, gathered once by the store side and handed to the
pure engines (world info, macros, prompt assembly), which never open the database themselves.

It is a plain value: building it is the loader's job (``tavernkit.store.chat_state``), and an
engine given the same state gives the same result.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tavernkit.models.character import Card, Character
from tavernkit.models.chat import Chat, Message
from tavernkit.models.group_context import GroupPromptContext
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.persona import Persona
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.profile import ConnectionProfile
from tavernkit.models.samplers import TextGenSettings
from tavernkit.models.settings import Compat, Settings
from tavernkit.models.templates import (
    ContextTemplate,
    InstructTemplate,
    ReasoningTemplate,
    SystemPrompt,
)

__all__ = ["BookScope", "ChatState", "ScopedBook"]

#: Where a lorebook comes from; SillyTavern scans chat, persona, then global/character books.
BookScope = Literal["global", "character", "character_extra", "chat", "persona"]


class ScopedBook(BaseModel):
    """A lorebook with the reason it is in this turn."""

    model_config = ConfigDict(frozen=True)

    name: str
    scope: BookScope
    book: Lorebook


class ChatState(BaseModel):
    """The inputs of one turn. ``chat`` may be None for a task without a chat."""

    model_config = ConfigDict(extra="forbid")

    settings: Settings = Field(default_factory=Settings)
    card: Card | None = None
    persona: Persona | None = None
    user_name: str = "User"
    books: list[ScopedBook] = Field(default_factory=list)
    chat_preset: ChatCompletionPreset | None = None
    #: the record id of ``chat_preset`` (what the regex allow list names)
    chat_preset_id: str | None = None
    textgen_preset: TextGenSettings | None = None
    #: the record id of ``textgen_preset``
    textgen_preset_id: str | None = None
    instruct: InstructTemplate | None = None
    context: ContextTemplate | None = None
    sysprompt: SystemPrompt | None = None
    reasoning: ReasoningTemplate | None = None
    profile: ConnectionProfile | None = None
    chat: Chat | None = None
    chat_id: str | None = None
    character_id: str | None = None
    #: The avatar file name without extension: what lorebook character filters compare.
    character_filename: str | None = None
    global_variables: dict[str, Any] = Field(default_factory=dict)
    #: A group turn: the members around ``card`` (the drafted one); ``None`` in a solo chat.
    group: GroupPromptContext | None = None

    @property
    def character(self) -> Character | None:
        return self.card.data if self.card is not None else None

    @property
    def compat(self) -> Compat:
        return self.settings.compat

    @property
    def messages(self) -> list[Message]:
        return self.chat.messages if self.chat is not None else []

    @property
    def local_variables(self) -> dict[str, Any]:
        return self.chat.variables if self.chat is not None else {}

    def books_in(self, *scopes: BookScope) -> list[Lorebook]:
        return [b.book for b in self.books if b.scope in scopes]
