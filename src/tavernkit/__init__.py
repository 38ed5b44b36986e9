"""tavernkit: an engine, server and CLI for character chat with LLMs, compatible with the
SillyTavern ecosystem.

The public surface is re-exported here; everything else may move between releases.
"""

from tavernkit.errors import (
    Conflict,
    FormatError,
    LimitExceeded,
    NotFound,
    PluginError,
    StoreError,
    TavernKitError,
)
from tavernkit.facade import Tavern
from tavernkit.library import ImportResult, Library

__all__ = [
    "Conflict",
    "FormatError",
    "ImportResult",
    "Library",
    "LimitExceeded",
    "NotFound",
    "PluginError",
    "StoreError",
    "Tavern",
    "TavernKitError",
]

__version__ = "0.1.0"
