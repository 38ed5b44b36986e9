"""tavernkit: an engine, server and CLI for character chat with LLMs, compatible with the
SillyTavern ecosystem.

The public surface is re-exported here; everything else may move between releases. The names
are imported on first use (module ``__getattr__``), so ``import tavernkit`` costs only this
module and the errors: a script or a CLI command that needs one part does not pay for building
every model class and the whole generation engine.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from tavernkit.context import TavernContext
    from tavernkit.facade import Tavern
    from tavernkit.generation.abort import AbortController, AbortSignal
    from tavernkit.generation.task import TaskResult
    from tavernkit.library import ImportResult, Library
    from tavernkit.tools.calls import ToolCall
    from tavernkit.tools.registry import FunctionTool

#: name -> the module that defines it, imported when the name is first read
_LAZY: dict[str, str] = {
    "AbortController": "tavernkit.generation.abort",
    "AbortSignal": "tavernkit.generation.abort",
    "FunctionTool": "tavernkit.tools.registry",
    "ImportResult": "tavernkit.library",
    "Library": "tavernkit.library",
    "TaskResult": "tavernkit.generation.task",
    "Tavern": "tavernkit.facade",
    "TavernContext": "tavernkit.context",
    "ToolCall": "tavernkit.tools.calls",
}

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tavernkit' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # the next read is a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
