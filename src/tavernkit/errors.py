"""The exception tree of tavernkit.

Every error the library raises on purpose derives from :class:`TavernKitError`, so callers can
catch one type. The tree (grown issue by issue, in the style of httpx's ``_exceptions.py``)::

    TavernKitError
    ├── FormatError            bad input file or value: names the file and the field
    │   └── LimitExceeded      a size limit (card JSON, image, archive, text field) was hit
    ├── StoreError             persistence failed
    │   ├── BackupError        a backup could not be made, verified or restored, or is damaged
    │   ├── StoreUnavailable   the database is unreachable or has no free connection (503)
    │   ├── SecretKeyError     the secret key cannot seal or open the stored API keys
    │   ├── NotFound           no record with that id/name for that owner
    │   └── Conflict           a unique name is taken, or a concurrent write lost
    │       ├── NameTaken      an import names a record that exists and differs
    │       └── HomeNotEmpty   a restore aimed at a home or database that holds data
    │       └── StaleRevision  a change was sent against a revision another writer replaced
    ├── PluginError            a plugin failed to load or registered something invalid
    ├── ToolSourceError        an MCP server registration is invalid, or its server failed
    │   └── ToolSourceUnavailable   its server could not be reached, or a tool call failed
    ├── TemplateError          a ChatLuna template's block condition is malformed or failed
    ├── ChatBusy               a turn is already generating in that chat
    ├── AccessError            the server refused a caller (``tavernkit.server``)
    │   ├── NotAuthenticated   no valid token, session or password (HTTP 401)
    │   ├── PermissionDenied   signed in, but not allowed (HTTP 403; a bad CSRF token too)
    │   │   └── EgressRefused  the egress policy refuses a destination (also a BadRequest)
    │   └── TooManyAttempts    a per-user rate limit (logins, turns) was hit (HTTP 429)
    ├── ServerConfigError      the server's settings are unsafe or invalid (refuses to start)
    ├── ShuttingDown           the server process is shutting down: it starts nothing (503)
    ├── OutsideWindow          a build read a message the turn did not load (also LookupError)
    ├── TokenBudgetExceeded    the mandatory prompts do not fit the context
    ├── PresetEditError        a preset edit is not possible (unknown or built-in prompt...)
    ├── EmbedderUnavailable    the ``embed`` extra or one of its files is missing
    ├── EmbeddingInputError    a text to embed is not a string (also TypeError)
    ├── EmbeddingError         an embeddings endpoint failed or answered the wrong shape
    ├── MemoryConfigError      memory settings name what does not exist (also ValueError)
    ├── UsageError             a slash command got arguments it cannot use (terminal chat)
    ├── RegexScriptError       a regex script object the engine cannot run (also TypeError)
    ├── ScriptError            an STscript failed: SillyTavern's parser or execution error
    │   └── ScriptBudgetExceeded    a script ran past its step or time budget
    ├── ProviderError          a model provider failed; the class says what policy may do
    │   ├── AuthError          bad, missing or unauthorised key (rotate the key, never retry)
    │   │   └── MissingCredential   no key is configured for a provider that needs one
    │   ├── QuotaExhausted     billing/quota used up (rotate the key; retrying cannot help)
    │   ├── RateLimited        too many requests now (retry after ``retry_after``)
    │   ├── Overloaded         the service is busy or failing (5xx, 529): retry, then fall back
    │   ├── ContextTooLong     the prompt does not fit the model's context window
    │   ├── ContentFiltered    a safety filter blocked the prompt or the reply
    │   ├── BadRequest         the request itself is wrong (fix it; retrying cannot help)
    │   │   └── ModelUnavailable    unknown, deprecated or unsupported model
    │   │       ├── LocalModelMissing   the embedded model's file is not installed
    │   │       │   └── PullError       ``pull_model`` could not fetch or unpack it
    │   │       └── MissingDependency   the embedded model's engine (xllamacpp) is missing
    │   ├── NetworkError       connection failed or timed out before a usable answer
    │   │   └── ProviderTimeout     connect / first-byte / idle-between-events timeout
    │   ├── StreamInterrupted  a stream broke after some text was delivered
    │   ├── ProtocolError      the provider answered with bytes we cannot understand
    │   └── TurnFailure        a failure the turn runner decides itself (empty reply, keys
    │                          cooling...), classified like a provider's
    └── GenerateTaskError      what ``generate_task`` raises: one ``code`` a caller can switch on
        ├── ChatTurnError          a chat turn (a ChatService verb or preview) cannot run as
        │                          asked: a bad override, an unknown profile or persona...
        ├── ToolCallParseError     a tool call could not be read or is not acceptable
        │   └── ToolArgumentsError a call's arguments break its tool's JSON Schema
        └── StructuredOutputError  the reply is not JSON or breaks the schema
    RequestAborted             base of the abort types; not a ``TavernKitError``: an abort is
    ├── AbortError             not a failure. A signal's abort (``throw_if_aborted``) ...
    └── Aborted                ... and a provider's (internal; turned into a finish event)

Internal control flow, never raised to a caller: ``StreamTimeout`` (a first-byte or idle
timeout fired; providers turn it into ``ProviderTimeout``), ``Unusable`` (a fallback entry the
resolver cannot use: skipped), ``ReviewUnavailable`` (the reply review cannot run),
``MacroRuntimeError`` / ``UrlRefused`` (a macro handler keeps its macro as written and records a
warning), ``DiceError`` (a ``{{roll}}`` formula that is not one; also ValueError) and
``NotStreamable`` (a chat file the streamed reader leaves to the whole-file one).

The classes live by family in :mod:`tavernkit.error_families` (``base``, ``access``,
``provider``, ``tasks``; the small internal ones stay here) and are imported from here: this
module is each one's home (``__module__``). Each class is also re-exported from the module
that raises it (``tavernkit.tools.errors``, ``tavernkit.providers.http``...), so either import
works; callers match them by type, never by name.

Messages never carry secrets (API keys): callers pass field names and file names, not values.
"""

from __future__ import annotations

from typing import Protocol

from tavernkit.error_families.access import (
    AccessError,
    EgressRefused,
    NotAuthenticated,
    PermissionDenied,
    ServerConfigError,
    TooManyAttempts,
)
from tavernkit.error_families.base import (
    Aborted,
    AbortError,
    BackupError,
    ChatBusy,
    Conflict,
    CoordinationError,
    ExprError,
    FormatError,
    HomeNotEmpty,
    LimitExceeded,
    NameTaken,
    NotFound,
    PluginError,
    RequestAborted,
    SecretKeyError,
    ShuttingDown,
    StaleRevision,
    StoreError,
    StoreUnavailable,
    TavernKitError,
    TemplateError,
    ToolSourceError,
    ToolSourceUnavailable,
)
from tavernkit.error_families.provider import (
    AuthError,
    BadRequest,
    ContentFiltered,
    ContextTooLong,
    ErrorClass,
    LocalModelMissing,
    MissingCredential,
    MissingDependency,
    ModelUnavailable,
    NetworkError,
    Overloaded,
    ProtocolError,
    ProviderError,
    ProviderTimeout,
    PullError,
    QuotaExhausted,
    RateLimited,
    StreamInterrupted,
    StreamTimeout,
    TurnFailure,
    Unusable,
)
from tavernkit.error_families.tasks import (
    ChatTurnError,
    GenerateTaskError,
    GenerateTaskErrorCode,
    ParseProblem,
    SchemaIssue,
    StructuredOutputError,
    ToolArgumentsError,
    ToolCallParseError,
)

# Each family's classes read this module as their home (as httpx's do): tracebacks, reprs and
# pickles name ``tavernkit.errors``, where every one is importable; the package face rewrites
# its public ones to ``tavernkit`` in turn.
for _value in list(globals().values()):
    if isinstance(_value, type) and _value.__module__.startswith("tavernkit.error_families."):
        _value.__module__ = __name__
del _value

__all__ = [
    "AbortError",
    "Aborted",
    "AccessError",
    "AuthError",
    "BackupError",
    "BadRequest",
    "ChatBusy",
    "ChatTurnError",
    "Conflict",
    "ContentFiltered",
    "ContextTooLong",
    "CoordinationError",
    "DiceError",
    "EgressRefused",
    "EmbedderUnavailable",
    "EmbeddingError",
    "EmbeddingInputError",
    "ErrorClass",
    "ExprError",
    "FormatError",
    "GenerateTaskError",
    "GenerateTaskErrorCode",
    "HomeNotEmpty",
    "LimitExceeded",
    "LocalModelMissing",
    "MacroRuntimeError",
    "MemoryConfigError",
    "MissingCredential",
    "MissingDependency",
    "ModelUnavailable",
    "NameTaken",
    "NetworkError",
    "NotAuthenticated",
    "NotFound",
    "NotStreamable",
    "OutsideWindow",
    "Overloaded",
    "ParseProblem",
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
    "ReviewUnavailable",
    "SchemaIssue",
    "ScriptBudgetExceeded",
    "ScriptError",
    "SecretKeyError",
    "ServerConfigError",
    "ShuttingDown",
    "SlashUsage",
    "StaleRevision",
    "StoreError",
    "StoreUnavailable",
    "StreamInterrupted",
    "StreamTimeout",
    "StructuredOutputError",
    "TavernKitError",
    "TemplateError",
    "TokenBudgetExceeded",
    "TooManyAttempts",
    "ToolArgumentsError",
    "ToolCallParseError",
    "ToolSourceError",
    "ToolSourceUnavailable",
    "TurnFailure",
    "Unusable",
    "UrlRefused",
    "UsageError",
]


class ReviewUnavailable(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class OutsideWindow(TavernKitError, LookupError):
    """A build read message ``index``, which the turn did not load. A ``TavernKitError``, so
    the places that contain a failing macro or provider let it through to the loader."""

    def __init__(self, index: int) -> None:
        self.index = index
        super().__init__(f"message {index} is outside the loaded window")


class PresetEditError(TavernKitError):
    """The edit is not possible (unknown prompt, built-in prompt, duplicate id...)."""


class TokenBudgetExceeded(TavernKitError):
    """The prompts that must be sent do not fit the context (SillyTavern's
    "Mandatory prompts exceed the context size")."""

    def __init__(self, identifier: str, needed: int, available: int) -> None:
        self.identifier = identifier
        self.needed = needed
        self.available = available
        super().__init__(
            f"Mandatory prompts exceed the context size: {identifier!r} needs {needed} tokens, "
            f"{available} left"
        )


class DiceError(ValueError):
    """The formula is not a roll, or exceeds the caps."""


class MacroRuntimeError(Exception):
    """Raised by a handler to keep its macro as written and record a warning."""


class UrlRefused(MacroRuntimeError):
    """The policy does not allow this request."""


class NotStreamable(Exception):
    """A chat file :func:`~tavernkit.formats.chats.iter_chat_file` leaves to the whole-file
    reader: a line that is not UTF-8 (read with U+FFFD in its place there, as SillyTavern
    reads it)."""


class EmbedderUnavailable(TavernKitError):
    """The embedder cannot run here: a package of the ``embed`` extra or one of its files is
    missing or not the expected file. The message says which, and how to fix it."""


class EmbeddingInputError(TavernKitError, TypeError):
    """A text to embed is not a string; ``index`` is its position in the batch."""

    def __init__(self, message: str, *, index: int) -> None:
        super().__init__(message)
        self.index = index


class EmbeddingError(TavernKitError):
    """Embeddings could not be made: the endpoint failed (``status`` when it answered) or
    returned another number or size of vectors than asked for. The message names the endpoint
    and the model, never a key."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class MemoryConfigError(TavernKitError, ValueError):
    """Memory settings that cannot work: an unknown embedder, a profile without an
    embeddings endpoint, a summary that is edited on a chat too short to hold it."""


class RegexScriptError(TavernKitError, TypeError):
    """A regex script object SillyTavern's engine cannot run (its ``getRegexedString`` throws
    a ``TypeError``): no ``replaceString``, no ``trimStrings`` when a group is inserted, a
    ``placement`` that is not a list. The message is JavaScript's."""


class SlashUsage(Protocol):
    """What :class:`UsageError` reads of a slash command (``tavernkit.cli.slash``)."""

    @property
    def usage(self) -> str: ...
    @property
    def summary(self) -> str: ...


class UsageError(TavernKitError):
    """A slash command was given arguments it cannot use; ``usage`` is its syntax line."""

    def __init__(self, command: SlashUsage, problem: str) -> None:
        self.command = command
        self.problem = problem
        super().__init__(f"{problem}; usage: {command.usage}  ({command.summary})")


class ScriptError(TavernKitError):
    """An STscript (SillyTavern's slash-command language) could not run.

    ``name`` is SillyTavern's class for it (``SlashCommandParserError`` when the text does not
    parse, ``SlashCommandExecutionError`` when a command failed), ``message`` its exact text,
    ``line``/``column`` (0-based) where it happened and ``hint`` the excerpt with a caret that
    SillyTavern shows.
    """

    def __init__(
        self,
        message: str,
        *,
        name: str = "SlashCommandExecutionError",
        line: int = 0,
        column: int = 0,
        hint: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.name = name
        self.line = line
        self.column = column
        self.hint = hint


class ScriptBudgetExceeded(ScriptError):
    """A script ran more commands (``limit`` steps) or longer (seconds) than its budget allows:
    loops with ``guard=off``, deep recursion of closures or a slow chain of generations stop
    here instead of holding a server."""

    def __init__(
        self,
        message: str,
        *,
        budget: str,
        limit: float,
        line: int = 0,
        column: int = 0,
        hint: str = "",
    ) -> None:
        super().__init__(message, name="ScriptBudgetExceeded", line=line, column=column, hint=hint)
        self.budget = budget
        self.limit = limit
