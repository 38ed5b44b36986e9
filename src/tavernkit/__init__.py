"""tavernkit: an engine, server and CLI for character chat with LLMs, compatible with the
SillyTavern ecosystem.

``__all__`` is the public surface: what an integrator needs (the facade, the chat service and
its outcome, the plugin context, sinks, aborts, tools) and every exception a caller may catch.
Everything else may move between releases. The names are imported on first use (module
``__getattr__``), so ``import tavernkit`` costs only this module and the errors: a script or a
CLI command that needs one part does not pay for building every model class and the whole
generation engine.

As httpx does, each public name's ``__module__`` reads ``"tavernkit"`` (tracebacks and reprs
show ``tavernkit.NotFound``, the name to import): the exceptions' at import, the lazy names'
when first resolved here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tavernkit._lazy_face import lazy_face
from tavernkit.errors import (
    Aborted,
    AbortError,
    AccessError,
    AuthError,
    BackupError,
    BadRequest,
    ChatBusy,
    ChatTurnError,
    Conflict,
    ContentFiltered,
    ContextTooLong,
    CoordinationError,
    EgressRefused,
    EmbedderUnavailable,
    EmbeddingError,
    EmbeddingInputError,
    FormatError,
    GenerateTaskError,
    HomeNotEmpty,
    LimitExceeded,
    LocalModelMissing,
    MemoryConfigError,
    MissingCredential,
    MissingDependency,
    ModelUnavailable,
    NameTaken,
    NetworkError,
    NotAuthenticated,
    NotFound,
    OutsideWindow,
    Overloaded,
    PermissionDenied,
    PluginError,
    PresetEditError,
    ProtocolError,
    ProviderError,
    ProviderTimeout,
    PullError,
    QuotaExhausted,
    RateLimited,
    RegexScriptError,
    RequestAborted,
    ScriptBudgetExceeded,
    ScriptError,
    SecretKeyError,
    ServerConfigError,
    ShuttingDown,
    StaleRevision,
    StoreError,
    StoreUnavailable,
    StreamInterrupted,
    StructuredOutputError,
    TavernKitError,
    TemplateError,
    TokenBudgetExceeded,
    ToolArgumentsError,
    ToolCallParseError,
    ToolSourceError,
    ToolSourceUnavailable,
    TooManyAttempts,
    TurnFailure,
    UsageError,
)

if TYPE_CHECKING:
    from tavernkit.chat.group_turn import GroupTurnOutcome
    from tavernkit.chat.reply import TurnOutcome
    from tavernkit.chat.service import ChatService
    from tavernkit.context import TavernContext
    from tavernkit.facade import Tavern
    from tavernkit.generation.abort import AbortController, AbortSignal
    from tavernkit.generation.sink import ResponseSink
    from tavernkit.library import Library
    from tavernkit.library_results import ImportResult
    from tavernkit.models.group import Group
    from tavernkit.runtime import Runtime
    from tavernkit.tasks.options import TaskResult
    from tavernkit.tools.calls import ToolCall
    from tavernkit.tools.registry import FunctionTool

#: name -> the module that defines it, imported when the name is first read
_LAZY: dict[str, str] = {
    "AbortController": "tavernkit.generation.abort",
    "AbortSignal": "tavernkit.generation.abort",
    "ChatService": "tavernkit.chat.service",
    "FunctionTool": "tavernkit.tools.registry",
    "Group": "tavernkit.models.group",
    "GroupTurnOutcome": "tavernkit.chat.group_turn",
    "ImportResult": "tavernkit.library_results",
    "Library": "tavernkit.library",
    "ResponseSink": "tavernkit.generation.sink",
    "Runtime": "tavernkit.runtime",
    "TaskResult": "tavernkit.tasks.options",
    "Tavern": "tavernkit.facade",
    "TavernContext": "tavernkit.context",
    "ToolCall": "tavernkit.tools.calls",
    "TurnOutcome": "tavernkit.chat.reply",
}

__all__ = [
    "AbortController",
    "AbortError",
    "AbortSignal",
    "Aborted",
    "AccessError",
    "AuthError",
    "BackupError",
    "BadRequest",
    "ChatBusy",
    "ChatService",
    "ChatTurnError",
    "Conflict",
    "ContentFiltered",
    "ContextTooLong",
    "CoordinationError",
    "EgressRefused",
    "EmbedderUnavailable",
    "EmbeddingError",
    "EmbeddingInputError",
    "FormatError",
    "FunctionTool",
    "GenerateTaskError",
    "Group",
    "GroupTurnOutcome",
    "HomeNotEmpty",
    "ImportResult",
    "Library",
    "LimitExceeded",
    "LocalModelMissing",
    "MemoryConfigError",
    "MissingCredential",
    "MissingDependency",
    "ModelUnavailable",
    "NameTaken",
    "NetworkError",
    "NotAuthenticated",
    "NotFound",
    "OutsideWindow",
    "Overloaded",
    "PermissionDenied",
    "PluginError",
    "PresetEditError",
    "ProtocolError",
    "ProviderError",
    "ProviderTimeout",
    "PullError",
    "QuotaExhausted",
    "RateLimited",
    "RegexScriptError",
    "RequestAborted",
    "ResponseSink",
    "Runtime",
    "ScriptBudgetExceeded",
    "ScriptError",
    "SecretKeyError",
    "ServerConfigError",
    "ShuttingDown",
    "StaleRevision",
    "StoreError",
    "StoreUnavailable",
    "StreamInterrupted",
    "StructuredOutputError",
    "TaskResult",
    "Tavern",
    "TavernContext",
    "TavernKitError",
    "TemplateError",
    "TokenBudgetExceeded",
    "TooManyAttempts",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallParseError",
    "ToolSourceError",
    "ToolSourceUnavailable",
    "TurnFailure",
    "TurnOutcome",
    "UsageError",
]

__version__ = "0.1.0"

# the exceptions are imported already (above): rewrite theirs now, as httpx does
for _name in __all__:
    _value = globals().get(_name)
    if isinstance(_value, type) and issubclass(_value, BaseException):
        _value.__module__ = "tavernkit"
del _name, _value


__getattr__, __dir__ = lazy_face("tavernkit", globals(), _LAZY, module_name="tavernkit")
