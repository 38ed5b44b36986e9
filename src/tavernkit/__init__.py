"""tavernkit: an engine, server and CLI for character chat with LLMs, compatible with the
SillyTavern ecosystem.

The public surface is re-exported here; everything else may move between releases.
"""

from tavernkit.context import TavernContext
from tavernkit.errors import (
    Conflict,
    FormatError,
    GenerateTaskError,
    LimitExceeded,
    NotFound,
    PluginError,
    StoreError,
    TavernKitError,
)
from tavernkit.facade import Tavern
from tavernkit.generation.abort import AbortController, AbortSignal
from tavernkit.generation.task import TaskResult
from tavernkit.library import ImportResult, Library
from tavernkit.tools.calls import ToolCall
from tavernkit.tools.registry import FunctionTool

__all__ = [
    "AbortController",
    "AbortSignal",
    "Conflict",
    "FormatError",
    "FunctionTool",
    "GenerateTaskError",
    "ImportResult",
    "Library",
    "LimitExceeded",
    "NotFound",
    "PluginError",
    "StoreError",
    "TaskResult",
    "Tavern",
    "TavernContext",
    "TavernKitError",
    "ToolCall",
]

__version__ = "0.1.0"
