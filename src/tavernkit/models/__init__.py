"""The value types every layer uses (pure: no I/O). See ARCHITECTURE.md, "Value types"."""

from tavernkit.models.base import DEFAULT_OWNER, Number, ValueModel, WireModel
from tavernkit.models.character import Card, Character, CharacterAsset, DepthPrompt
from tavernkit.models.character_book import CharacterBook, CharacterBookEntry
from tavernkit.models.chat import (
    Chat,
    ChatHeader,
    ChatMetadata,
    ContentPart,
    ImagePart,
    Message,
    MessageExtra,
    Swipe,
    SwipeInfo,
    TextPart,
    ToolInvocation,
)
from tavernkit.models.lorebook import (
    CharacterFilter,
    ExtensionPromptRole,
    Lorebook,
    LoreEntry,
    SelectiveLogic,
    WorldInfoPosition,
)
from tavernkit.models.persona import Persona, PersonaPosition
from tavernkit.models.preset import (
    ChatCompletionPreset,
    PromptDefinition,
    PromptOrderItem,
    PromptOrderList,
)
from tavernkit.models.profile import (
    CapabilityOverrides,
    ConnectionProfile,
    CredentialRef,
    CustomEndpoint,
    FallbackChain,
    FallbackEntry,
)
from tavernkit.models.samplers import KoboldSettings, NovelSettings, TextGenSettings
from tavernkit.models.settings import (
    Compat,
    PromptSettings,
    ReasoningSettings,
    Selections,
    Settings,
    WorldInfoSettings,
)
from tavernkit.models.templates import (
    ContextTemplate,
    InstructTemplate,
    ReasoningTemplate,
    SystemPrompt,
)

__all__ = [
    "DEFAULT_OWNER",
    "CapabilityOverrides",
    "Card",
    "Character",
    "CharacterAsset",
    "CharacterBook",
    "CharacterBookEntry",
    "CharacterFilter",
    "Chat",
    "ChatCompletionPreset",
    "ChatHeader",
    "ChatMetadata",
    "Compat",
    "ConnectionProfile",
    "ContentPart",
    "ContextTemplate",
    "CredentialRef",
    "CustomEndpoint",
    "DepthPrompt",
    "ExtensionPromptRole",
    "FallbackChain",
    "FallbackEntry",
    "ImagePart",
    "InstructTemplate",
    "KoboldSettings",
    "LoreEntry",
    "Lorebook",
    "Message",
    "MessageExtra",
    "NovelSettings",
    "Number",
    "Persona",
    "PersonaPosition",
    "PromptDefinition",
    "PromptOrderItem",
    "PromptOrderList",
    "PromptSettings",
    "ReasoningSettings",
    "ReasoningTemplate",
    "Selections",
    "SelectiveLogic",
    "Settings",
    "Swipe",
    "SwipeInfo",
    "SystemPrompt",
    "TextGenSettings",
    "TextPart",
    "ToolInvocation",
    "ValueModel",
    "WireModel",
    "WorldInfoPosition",
    "WorldInfoSettings",
]
