"""The kind -> model map the store validates records with on the way out.

The store keeps records as JSON and does not care about their fields; this map is where the
two meet. Callers may pass their own (tests register small models); :func:`default_models` is
the one the package uses.
"""

from __future__ import annotations

from pydantic import BaseModel

from tavernkit.models.character import Card
from tavernkit.models.chatluna import CHATLUNA_PRESET_KIND, ChatLunaPreset
from tavernkit.models.group import Group
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.mcp import MCP_SERVER_KIND, McpServer
from tavernkit.models.persona import Persona
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.profile import ConnectionProfile, CustomEndpoint, FallbackChain
from tavernkit.models.quick_reply import QuickReplySet
from tavernkit.models.samplers import KoboldSettings, NovelSettings, TextGenSettings
from tavernkit.models.settings import Settings
from tavernkit.models.templates import (
    ContextTemplate,
    InstructTemplate,
    ReasoningTemplate,
    SystemPrompt,
)

__all__ = ["default_models"]


def default_models() -> dict[str, type[BaseModel]]:
    """A fresh registry (callers may change it) of the package's own models. ``character`` is
    the whole card (``spec``, ``data`` and the rest), so an export writes back what came in."""
    return {
        "character": Card,
        "persona": Persona,
        "lorebook": Lorebook,
        "chat_preset": ChatCompletionPreset,
        "instruct": InstructTemplate,
        "context": ContextTemplate,
        "sysprompt": SystemPrompt,
        "reasoning": ReasoningTemplate,
        "textgen_preset": TextGenSettings,
        "kobold_preset": KoboldSettings,
        "novel_preset": NovelSettings,
        "connection_profile": ConnectionProfile,
        "fallback_chain": FallbackChain,
        "custom_endpoint": CustomEndpoint,
        "quick_reply_set": QuickReplySet,
        "group": Group,
        "settings": Settings,
        MCP_SERVER_KIND: McpServer,
        CHATLUNA_PRESET_KIND: ChatLunaPreset,
    }
