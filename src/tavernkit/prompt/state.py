"""What a prompt build reads: :class:`PromptState`, plus the small value types around it.

The builders are pure functions of a ``PromptState`` and the world-info result. Macro
evaluation goes through one injected callable (:class:`Substitute`): SillyTavern calls
``substituteParams`` at many points of a build, and stateful macros (``{{setvar}}``) must see
those calls in the same order, so the whole pipeline shares one evaluator.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from tavernkit.errors import TokenBudgetExceeded as TokenBudgetExceeded
from tavernkit.models.character import Character
from tavernkit.models.chat import ChatMetadata, Message
from tavernkit.models.chat_window import count_user
from tavernkit.models.group_context import GroupPromptContext
from tavernkit.models.persona import Persona, PersonaPosition
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.settings import PromptSettings, ReasoningSettings
from tavernkit.models.templates import (
    ContextTemplate,
    InstructTemplate,
    ReasoningTemplate,
    SystemPrompt,
)
from tavernkit.text.regex_scripts import ActiveScripts

__all__ = [
    "AuthorsNote",
    "ExtensionPosition",
    "ExtensionPrompt",
    "GenerationType",
    "PromptState",
    "Substitute",
    "TokenBudgetExceeded",
    "chat_before_generation",
    "names_only_substitute",
]

#: SillyTavern's generation types (``Generate(type)``).
GenerationType = Literal["normal", "continue", "impersonate", "swipe", "regenerate", "quiet"]


class ExtensionPosition:
    """``extension_prompt_types``: where an extension prompt goes."""

    NONE = -1
    IN_PROMPT = 0
    IN_CHAT = 1
    BEFORE_PROMPT = 2


@dataclass(frozen=True, slots=True)
class ExtensionPrompt:
    """One entry of SillyTavern's ``extension_prompts`` map (Author's Note, depth prompts...).

    ``role`` is numeric as in SillyTavern: 0 system, 1 user, 2 assistant.
    """

    value: str
    position: int = ExtensionPosition.IN_PROMPT
    depth: int | None = 0
    role: int | None = 0
    scan: bool = False


@dataclass(frozen=True, slots=True)
class AuthorsNote:
    """The chat's Author's Note (``note_*`` chat metadata), with SillyTavern's defaults."""

    prompt: str = ""
    interval: int = 1
    depth: int = 4
    position: int = ExtensionPosition.IN_CHAT
    role: int = 0

    @classmethod
    def from_metadata(cls, metadata: ChatMetadata | Mapping[str, Any] | None) -> AuthorsNote:
        def get(name: str) -> Any:
            if metadata is None:
                return None
            if isinstance(metadata, Mapping):
                return metadata.get(name)
            return getattr(metadata, name, None)

        def num(name: str, default: int) -> int:
            raw = get(name)
            if isinstance(raw, bool) or not isinstance(raw, int | float):
                return default
            return int(raw)

        return cls(
            prompt=str(get("note_prompt") or ""),
            interval=num("note_interval", 1),
            depth=num("note_depth", 4),
            position=num("note_position", ExtensionPosition.IN_CHAT),
            role=num("note_role", 0),
        )

    def fires(self, messages: Sequence[Message]) -> bool:
        """Whether the note goes in this turn (``setFloatingPrompt``): every ``interval``-th
        user message; interval 1 always, 0 or less never."""
        if self.interval <= 0:
            return False
        if self.interval == 1:
            # Every turn: no need to count a long chat's user messages.
            return True
        user_count = count_user(messages)  # the store counts what a turn did not load
        if user_count <= 0:
            return False
        if user_count >= self.interval:
            return user_count % self.interval == 0
        return self.interval - user_count == 0


class Substitute(Protocol):
    """The macro evaluator of one build (SillyTavern's ``substituteParams``).

    ``original`` is what ``{{original}}`` expands to (card prompt overrides); ``dynamic`` adds
    per-call macros such as ``{{lastChatMessage}}``.
    """

    def __call__(
        self,
        text: str,
        /,
        *,
        original: str | None = None,
        dynamic: Mapping[str, str] | None = None,
    ) -> str: ...


def names_only_substitute(user: str, char: str) -> Substitute:
    """A minimal evaluator that knows ``{{user}}``, ``{{char}}`` and ``{{original}}`` only
    (for tests and for callers that run without the macro engine)."""

    def substitute(
        text: str,
        /,
        *,
        original: str | None = None,
        dynamic: Mapping[str, str] | None = None,
    ) -> str:
        if "{{" not in text:
            return text
        out = text.replace("{{user}}", user).replace("{{char}}", char)
        if original is not None:
            out = out.replace("{{original}}", original, 1).replace("{{original}}", "")
        for key, value in (dynamic or {}).items():
            out = out.replace("{{" + key + "}}", value)
        return out

    return substitute


def chat_before_generation(messages: Sequence[Message], kind: str) -> Sequence[Message]:
    """The chat a generation of ``kind`` scans and builds from, given the chat as it stood
    when the generation was asked for.

    A regeneration first removes the reply it replaces (the last message, when it is not the
    user's), as SillyTavern 1.18's ``Generate('regenerate')`` deletes it before the world-info
    scan and the build: in-chat injections (depth prompts, the author's note, world info at
    depth) are then placed relative to the remaining chat, and the scan never reads the
    removed reply. Every other kind builds from the chat as it is. Apply it once, where the
    chat still holds the reply (the chat service removes it from the store itself).
    """
    if kind == "regenerate" and messages and not messages[-1].is_user:
        return messages[:-1]
    return messages


@dataclass(slots=True)
class PromptState:
    """Everything one prompt build reads (the prompt engine's view of a ``ChatState``).

    ``messages`` is the chat as stored, oldest first (the builders drop hidden messages and
    apply the generation type themselves). ``preset`` is used by chat completion;
    ``instruct``/``context``/``sysprompt`` by text completion. ``max_context`` and
    ``max_response`` default to the preset's (chat) or ``settings``' (text) values.
    """

    character: Character
    messages: Sequence[Message] = ()
    persona: Persona | None = None
    user_name: str = "User"
    chat_metadata: ChatMetadata | None = None
    preset: ChatCompletionPreset | None = None
    instruct: InstructTemplate | None = None
    context: ContextTemplate | None = None
    sysprompt: SystemPrompt | None = None
    instruct_enabled: bool = False
    sysprompt_enabled: bool = True
    settings: PromptSettings = field(default_factory=PromptSettings)
    reasoning: ReasoningSettings | None = None
    reasoning_template: ReasoningTemplate | None = None
    authors_note: AuthorsNote | None = None
    #: Extra extension prompts by key (extensions, scripts); merged with the built-in ones.
    extension_prompts: Mapping[str, ExtensionPrompt] = field(default_factory=dict)
    model: str = ""
    source: str = "openai"
    max_context: int | None = None
    max_response: int | None = None
    #: ``extra.api`` of the current connection (reasoning is carried only from the same API).
    api: str = ""
    #: The group around the drafted member (``character``) in a group turn; ``None`` solo.
    group: GroupPromptContext | None = None
    #: The regex scripts that run (global, allowed preset and card scripts; ``prompt/regex.py``)
    regex: ActiveScripts | None = None

    @property
    def user(self) -> str:
        return self.persona.name if self.persona and self.persona.name else self.user_name

    @property
    def char(self) -> str:
        return self.character.name

    @property
    def persona_description(self) -> str:
        return self.persona.description if self.persona else ""

    @property
    def persona_position(self) -> int:
        if self.persona is None:
            return self.settings.persona_description_position
        position = self.persona.position
        # The legacy "after character" position was migrated to "in prompt" by SillyTavern.
        return PersonaPosition.IN_PROMPT if position == PersonaPosition.AFTER_CHAR else position

    @property
    def note(self) -> AuthorsNote:
        if self.authors_note is not None:
            return self.authors_note
        return AuthorsNote.from_metadata(self.chat_metadata)

    def replace(self, **changes: Any) -> PromptState:
        return dataclasses.replace(self, **changes)


#: A callable that counts tokens (``Tokenizer.count``).
CountTokens = Callable[[str], int]
