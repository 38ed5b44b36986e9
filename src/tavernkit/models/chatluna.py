"""``ChatLunaPreset``: a ChatLuna character preset (its YAML ``RawPreset``), record kind
``chatluna_preset``.

The fields are ChatLuna's own, spelled as in its files: ``keywords`` (the preset's names),
``prompts`` (``role`` system/user/assistant, ``content`` text or content parts, optional
``type``), ``format_user_prompt`` (the template each user message is wrapped in, default
``{prompt}``), ``world_lores`` (a lorebook: the first item without ``keywords`` holds the
defaults, the others are entries), ``authors_note`` (``author_notes`` is read as the same),
``knowledge``, ``config`` and ``version``. Keys this model does not name are kept, so an
export writes back what came in. Templates are ChatLuna's dialect
(:mod:`tavernkit.text.render.chatluna`);
:meth:`~tavernkit.text.render.ChatLunaRenderService.render_preset_template` renders them.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import Field, model_validator

from tavernkit.models.base import WireModel

__all__ = [
    "CHATLUNA_PRESET_KIND",
    "ChatLunaAuthorsNote",
    "ChatLunaLore",
    "ChatLunaPreset",
    "ChatLunaPrompt",
]

CHATLUNA_PRESET_KIND = "chatluna_preset"
LorePosition = Literal[
    "before_char_defs",
    "after_char_defs",
    "before_scenario",
    "after_scenario",
    "before_example_messages",
    "after_example_messages",
]


class ChatLunaPrompt(WireModel):
    role: Literal["system", "user", "assistant"]
    content: str | list[dict[str, Any]]
    type: str | None = None

    def text(self) -> str:
        """The text of the prompt (content parts: their text parts joined)."""
        if isinstance(self.content, str):
            return self.content
        return "".join(str(p.get("text", "")) for p in self.content if p.get("type") == "text")


class ChatLunaLore(WireModel):
    """One ``world_lores`` item: an entry (``keywords`` and ``content``) or the defaults."""

    keywords: str | list[str] | None = None
    content: str | None = None
    insertPosition: LorePosition | None = None
    scanDepth: int | None = None
    tokenLimit: int | None = None
    recursiveScan: bool | None = None
    maxRecursionDepth: int | None = None
    matchWholeWord: bool | None = None
    constant: bool | None = None
    caseSensitive: bool | None = None
    enabled: bool | None = None
    order: float | None = None

    @property
    def is_entry(self) -> bool:
        return self.keywords is not None

    def keyword_list(self) -> list[str]:
        if self.keywords is None:
            return []
        return [self.keywords] if isinstance(self.keywords, str) else list(self.keywords)


class ChatLunaAuthorsNote(WireModel):
    content: str
    insertPosition: Literal["after_char_defs", "in_chat"] = "in_chat"
    #: 0 is the end of the history
    insertDepth: int = 0
    #: 0 never; N every Nth user turn
    insertFrequency: int = 1


class ChatLunaPreset(WireModel):
    """A ChatLuna preset (see the module docstring); ``name`` is tavernkit's record name
    (the file's stem on import, else the first keyword)."""

    name: str | None = None
    keywords: list[str] = Field(min_length=1)
    prompts: list[ChatLunaPrompt] = Field(default_factory=list)
    format_user_prompt: str | None = None
    world_lores: list[ChatLunaLore] | None = None
    authors_note: ChatLunaAuthorsNote | None = None
    author_notes: ChatLunaAuthorsNote | None = None
    knowledge: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    version: Any = None

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.authors_note is not None and self.author_notes is not None:
            raise ValueError("a ChatLuna preset defines both authors_note and author_notes")
        if self.world_lores and sum(1 for lore in self.world_lores if not lore.is_entry) > 1:
            raise ValueError("a ChatLuna preset defines more than one world lore defaults item")
        for lore in self.world_lores or ():
            if lore.is_entry and (not lore.keyword_list() or lore.content is None):
                raise ValueError("a world lore entry needs keywords and content")
        return self

    @property
    def note(self) -> ChatLunaAuthorsNote | None:
        """The author's note, under either of ChatLuna's spellings."""
        return self.authors_note or self.author_notes

    def messages(self) -> list[dict[str, Any]]:
        """The prompts as ChatLuna's loader makes them: LangChain message types (``human``,
        ``ai``, ``system``), the prompt's ``type`` in ``additional_kwargs``."""
        kinds = {"user": "human", "assistant": "ai", "system": "system"}
        return [
            {
                "type": kinds[prompt.role],
                "content": prompt.content,
                "additional_kwargs": {"type": prompt.type} if prompt.type is not None else {},
            }
            for prompt in self.prompts
        ]

    @property
    def input_format(self) -> str:
        return self.format_user_prompt or "{prompt}"

    def lore_defaults(self) -> ChatLunaLore | None:
        return next((lore for lore in self.world_lores or () if not lore.is_entry), None)

    def lore_entries(self) -> list[ChatLunaLore]:
        return [lore for lore in self.world_lores or () if lore.is_entry]
