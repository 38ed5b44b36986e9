"""The exception tree of tavernkit.

Every error the library raises on purpose derives from :class:`TavernKitError`, so callers can
catch one type. The tree (grown issue by issue, in the style of httpx's ``_exceptions.py``)::

    TavernKitError
    ├── FormatError            bad input file or value: names the file and the field
    │   └── LimitExceeded      a size limit (card JSON, image, archive, text field) was hit
    ├── StoreError             persistence failed
    │   ├── NotFound           no record with that id/name for that owner
    │   └── Conflict           a unique name is taken, or a concurrent write lost
    ├── PluginError            a plugin failed to load or registered something invalid
    ├── ToolSourceError        an MCP server registration is invalid, or its server failed
    ├── TemplateError          a ChatLuna template's block condition is malformed or failed
    ├── ChatBusy               a turn is already generating in that chat
    ├── AccessError            the server refused a caller (``tavernkit.server``)
    │   ├── NotAuthenticated   no valid token, session or password (HTTP 401)
    │   ├── PermissionDenied   signed in, but not allowed (HTTP 403; a bad CSRF token too)
    │   └── TooManyAttempts    a per-user rate limit (logins, turns) was hit (HTTP 429)
    ├── ServerConfigError      the server's settings are unsafe or invalid (refuses to start)
    ├── OutsideWindow          a build read a message the turn did not load (also LookupError)
    ├── TokenBudgetExceeded    the mandatory prompts do not fit the context
    ├── PresetEditError        a preset edit is not possible (unknown or built-in prompt...)
    ├── EmbedderUnavailable    the ``embed`` extra or one of its files is missing
    ├── EmbeddingInputError    a text to embed is not a string (also TypeError)
    ├── EmbeddingError         an embeddings endpoint failed or answered the wrong shape
    ├── MemoryConfigError      memory settings name what does not exist (also ValueError)
    ├── UsageError             a slash command got arguments it cannot use (terminal chat)
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
``NotTrusted`` / ``NotPlannable`` (the trusted read path of stored records hands a record or a
model class to ``model_validate`` instead).

Each class is re-exported from the module that raises it (``tavernkit.tools.errors``,
``tavernkit.providers.http``...), so either import works; callers match them by type, never by
name.

Messages never carry secrets (API keys): callers pass field names and file names, not values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol, get_args

__all__ = [
    "AbortError",
    "Aborted",
    "AccessError",
    "AuthError",
    "BadRequest",
    "ChatBusy",
    "ChatTurnError",
    "Conflict",
    "ContentFiltered",
    "ContextTooLong",
    "CoordinationError",
    "DiceError",
    "EmbedderUnavailable",
    "EmbeddingError",
    "EmbeddingInputError",
    "ErrorClass",
    "ExprError",
    "FormatError",
    "GenerateTaskError",
    "GenerateTaskErrorCode",
    "LimitExceeded",
    "LocalModelMissing",
    "MacroRuntimeError",
    "MemoryConfigError",
    "MissingCredential",
    "MissingDependency",
    "ModelUnavailable",
    "NetworkError",
    "NotAuthenticated",
    "NotFound",
    "NotPlannable",
    "NotTrusted",
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
    "RequestAborted",
    "ReviewUnavailable",
    "SchemaIssue",
    "ServerConfigError",
    "SlashUsage",
    "StoreError",
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
    "TurnFailure",
    "Unusable",
    "UrlRefused",
    "UsageError",
]


class TavernKitError(Exception):
    """Base class of every error tavernkit raises on purpose."""


class RequestAborted(Exception):
    """The base of every abort type: :class:`tavernkit.generation.abort.AbortError` (a
    signal's ``throw_if_aborted``) and the providers' internal ``Aborted``. Aborts are matched
    by this type (never by class name); it is not a :class:`TavernKitError`, because an abort
    is the caller's choice, not a failure a ``except TavernKitError`` should report."""


class FormatError(TavernKitError, ValueError):
    """An input could not be read or a value could not be written in an external format.

    ``source`` is the file name (or another label such as ``"<bytes>"``), ``field`` the
    JSON path or chunk that was wrong (``"data.character_book.entries[3].keys"``).
    """

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None):
        self.reason = message
        self.source = source
        self.field = field
        parts = []
        if source:
            parts.append(str(source))
        if field:
            parts.append(f"field {field!r}")
        prefix = ": ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)

    def with_source(self, source: str) -> FormatError:
        """The same error naming ``source``, for readers that learn the file name late."""
        if self.source:
            return self
        err = type(self).__new__(type(self))
        FormatError.__init__(err, self.reason, source=source, field=self.field)
        return err


class LimitExceeded(FormatError):
    """An input was larger than a configured limit (a guard against bombs and runaway files)."""


class StoreError(TavernKitError):
    """Persistence failed."""


class CoordinationError(TavernKitError):
    """What the server processes share (Redis: turn event logs, chat locks, rate limits, key
    cooldowns) could not be reached or answered wrongly. The message names the server without
    its password."""


class NotFound(StoreError, LookupError):
    """No record with that id or name exists for that owner."""


class Conflict(StoreError):
    """The write would break a uniqueness rule or lost a race."""


class PluginError(TavernKitError):
    """A plugin could not be loaded or registered something invalid."""


class TemplateError(TavernKitError, ValueError):
    """A ChatLuna-dialect template cannot be rendered: a block condition (``{if ...}``,
    ``{for ...}``, ``{while ...}``, ``{repeat ...}``) does not parse or fails, which fails the
    whole render as in ChatLuna (an expression tag that fails renders ``''`` instead)."""


class ExprError(ValueError):
    """Internal to the ChatLuna dialect: an expression that does not parse (its tag is kept
    as text) or fails (its tag renders ``''``); in a block condition it becomes a
    :class:`TemplateError`."""


class ToolSourceError(TavernKitError):
    """An MCP server registration is invalid, its server could not be started or reached, or
    a tool call on it failed. ``source`` is the registration's name. The message never holds
    the registration's credential."""

    def __init__(self, message: str, *, source: str | None = None) -> None:
        self.source = source
        super().__init__(f"MCP server {source!r}: {message}" if source else message)


class ChatBusy(TavernKitError):
    """A chat already has a turn generating; turns of one chat never interleave. Ask again
    with ``interrupt=True`` to stop the running turn (its delivered text is kept) first."""

    def __init__(self, chat_id: str) -> None:
        self.chat_id = chat_id
        super().__init__(f"chat {chat_id!r} is already generating a reply")


class AccessError(TavernKitError):
    """The server refused the caller. Messages never say whether a user name exists."""


class NotAuthenticated(AccessError):
    """No valid bearer token, session cookie or password was given (HTTP 401)."""


class PermissionDenied(AccessError):
    """The caller is known but may not do this: not an admin, or a cookie request without the
    session's CSRF token (HTTP 403)."""


class TooManyAttempts(AccessError):
    """A per-user rate limit (logins, turns) was hit; ``retry_after_s`` says when the next
    attempt is allowed (HTTP 429 with ``Retry-After``)."""

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message)


class ServerConfigError(TavernKitError):
    """The server's settings are invalid or unsafe (e.g. a non-loopback address with accounts
    off): the server refuses to start."""


class ProviderError(TavernKitError):
    """A model provider failed. Adapters classify every failure into one subclass (from the
    status, the error body, or an error inside a 200 stream), so fallback, key rotation and
    retry policy switch on the class and never on message text.

    ``body`` is the provider's error body with secrets scrubbed; no attribute and no message
    ever carries an API key. ``retryable`` says whether the same request may succeed later.
    """

    retryable: bool = False
    #: the provider's own ``x-should-retry`` verdict, which overrides ``retryable`` when set
    should_retry: bool | None = None

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: str | None = None,
        code: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        provider: str | None = None,
        model: str | None = None,
    ):
        self.reason = message
        self.status = status
        self.body = body
        self.code = code
        self.request_id = request_id
        self.retry_after = retry_after
        self.provider = provider
        self.model = model
        where = " ".join(
            part
            for part in (
                provider or "",
                f"model {model!r}" if model else "",
                f"HTTP {status}" if status else "",
            )
            if part
        )
        super().__init__(f"{where}: {message}" if where else message)


class AuthError(ProviderError):
    """The key was rejected or lacks permission (Gemini reports this as HTTP 400)."""


class MissingCredential(AuthError):
    """No key is configured for a provider that needs one."""


class QuotaExhausted(ProviderError):
    """Billing or quota is used up: a retry cannot help, another key might."""


class RateLimited(ProviderError):
    """Too many requests for now; ``retry_after`` (seconds) when the provider said."""

    retryable = True


class Overloaded(ProviderError):
    """The service is overloaded or failing on its side (5xx, Anthropic 529)."""

    retryable = True


class ContextTooLong(ProviderError):
    """The prompt does not fit; ``n_prompt`` / ``n_ctx`` when the provider reported them."""

    def __init__(
        self,
        message: str,
        *,
        n_prompt: int | None = None,
        n_ctx: int | None = None,
        **kwargs: Any,
    ):
        super().__init__(message, **kwargs)
        self.n_prompt = n_prompt
        self.n_ctx = n_ctx


class ContentFiltered(ProviderError):
    """A safety filter blocked the prompt or the reply."""


class BadRequest(ProviderError):
    """The request is malformed or uses an unsupported parameter."""


class ModelUnavailable(BadRequest):
    """The model is unknown, deprecated, unavailable or does not support the request."""


class NetworkError(ProviderError):
    """The connection failed before a usable answer arrived."""

    retryable = True


class ProviderTimeout(NetworkError):
    """A timeout fired; ``phase`` is ``"connect"``, ``"first_byte"`` or ``"idle"``."""

    def __init__(self, message: str, *, phase: str, **kwargs: Any):
        super().__init__(message, **kwargs)
        self.phase = phase


class StreamInterrupted(ProviderError):
    """The stream ended early (no terminator, dropped connection, idle timeout after text,
    or an error event mid-stream); ``delivered_text`` is what had arrived, so the turn can be
    continued rather than lost. ``cause_class`` is the classified cause when there was one."""

    def __init__(
        self,
        message: str,
        *,
        delivered_text: str = "",
        cause: ProviderError | None = None,
        **kwargs: Any,
    ):
        super().__init__(message, **kwargs)
        self.delivered_text = delivered_text
        self.cause = cause

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        return self.cause.retryable if self.cause is not None else True


class ProtocolError(ProviderError):
    """The provider sent bytes we cannot understand (bad JSON, bad UTF-8, unknown shape)."""


# --------------------------------------------------------------------------------------------
# generate_task errors

#: The codes of :class:`GenerateTaskError`: the product brief's ten, plus ``tool_call_missing``
#: (a required call never came) and ``context_budget`` (mandatory prompts exceed the context),
#: which newer front ends added.
GenerateTaskErrorCode = Literal[
    "aborted",
    "network",
    "auth_missing",
    "rate_limit",
    "invalid_input",
    "unsupported_api",
    "tool_call_parse",
    "json_schema_violation",
    "no_response",
    "unknown",
    "tool_call_missing",
    "context_budget",
]

_CODES: frozenset[str] = frozenset(get_args(GenerateTaskErrorCode))


class GenerateTaskError(TavernKitError):
    """The one error ``generate_task`` and its helpers raise; callers switch on ``code``.

    ``cause`` is the underlying exception when there was one (also chained as ``__cause__``
    by :func:`tavernkit.task_errors.task_error_from`, which maps any exception onto a code);
    ``details`` is diagnostic context that is safe to log (the rejected raw arguments, schema
    errors, ``retry_after``, ``delivered_text``), never a secret.
    """

    def __init__(
        self,
        code: GenerateTaskErrorCode,
        message: str,
        cause: BaseException | None = None,
        details: Mapping[str, Any] | None = None,
    ):
        if code not in _CODES:
            # a typo in a code would silently defeat every caller's switch
            raise ValueError(f"unknown GenerateTaskError code {code!r}")
        self.code: GenerateTaskErrorCode = code
        self.message = message
        self.cause = cause
        self.details: dict[str, Any] = dict(details) if details else {}
        super().__init__(f"[{code}] {message}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r})"


class ChatTurnError(GenerateTaskError):
    """What a chat turn raises when it cannot run as asked (``ChatService`` verbs and
    previews): an unknown override, profile or persona, a profile bound to a missing preset,
    a connection that cannot be resolved. The same ``code`` and ``details`` as
    :class:`GenerateTaskError`, which it subclasses so callers that caught that keep working;
    catch this type to tell a chat turn's refusal from a task's.

    A turn that *starts* and then fails does not raise: it ends in a failed ``TurnOutcome``.
    """

    @classmethod
    def of(cls, error: GenerateTaskError) -> ChatTurnError:
        """``error`` (raised by code chat turns share with tasks) as a chat turn's error: the
        same code, message, cause and details (raise it ``from error``)."""
        if isinstance(error, ChatTurnError):
            return error
        return cls(error.code, error.message, error.cause, error.details)


# --- the layers' own errors (each re-exported from the module that raises it) -----------


ErrorClass = Literal[
    "auth",
    "missing_credential",
    "quota",
    "rate_limit",
    "overloaded",
    "context_too_long",
    "content_filter",
    "model_unavailable",
    "bad_request",
    "timeout",
    "network",
    "interrupted",
    "protocol",
    "empty_response",
    "length_cap",
    "speaker_guard",
    "keys_cooling",
    "not_admitted",
    "no_credentials",
    "unknown",
]


class TurnFailure(ProviderError):
    """A failure the runner decides itself (empty reply, speaker guard, all keys cooling,
    admission refused): not from a provider, but policy switches on it the same way."""

    def __init__(self, error_class: ErrorClass, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.error_class: ErrorClass = error_class


class AbortError(RequestAborted):
    """Raised by :meth:`AbortSignal.throw_if_aborted`; a
    :class:`~tavernkit.errors.RequestAborted`, which
    :func:`tavernkit.task_errors.task_error_from` maps to ``aborted``."""


class Aborted(RequestAborted):
    """The caller aborted the request (internal; providers turn it into a finish event)."""


class StreamTimeout(Exception):
    """A first-byte or idle timeout fired (internal; ``phase`` says which)."""

    def __init__(self, phase: str, seconds: float) -> None:
        super().__init__(f"no data for {seconds:g} s ({phase})")
        self.phase = phase
        self.seconds = seconds


class LocalModelMissing(ModelUnavailable):
    """No GGUF file for the local model was found."""


class MissingDependency(ModelUnavailable):
    """The local model needs an optional dependency that is not installed."""

    def __init__(self, module: str, *, extra: str = "local", model: str | None = None) -> None:
        super().__init__(
            f"the local model needs {module!r}: pip install 'tavernkit[{extra}]'",
            provider="local",
            model=model,
        )
        self.module = module
        self.extra = extra


class PullError(LocalModelMissing):
    """``pull_model`` could not fetch or unpack the model."""


class Unusable(Exception):
    """The resolver cannot use an entry (no credentials, unknown model...): skip it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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


#: What went wrong in a prompt-protocol reply; the corrective message is chosen by it.
ParseProblem = Literal[
    "missing_trigger",
    "missing_block",
    "malformed_xml",
    "bad_cdata",
    "bad_json",
    "bad_shape",
    "no_calls",
    "unknown_function",
    "invalid_arguments",
]


@dataclass(frozen=True, slots=True)
class SchemaIssue:
    """One JSON-Schema violation: where (``$.a[0].b``), what, and which keyword failed."""

    path: str
    message: str
    keyword: str = ""


class ToolCallParseError(GenerateTaskError):
    """A tool call could not be read or is not acceptable (``tool_call_parse``)."""

    def __init__(
        self,
        problem: ParseProblem,
        message: str,
        *,
        raw_text: str | None = None,
        raw_arguments: str | None = None,
        name: str | None = None,
        cause: BaseException | None = None,
        details: Mapping[str, Any] | None = None,
    ):
        info: dict[str, Any] = {"problem": problem}
        if name is not None:
            info["name"] = name
        if raw_arguments is not None:
            info["raw_arguments"] = raw_arguments
        if raw_text is not None:
            info["raw_text"] = raw_text
        info.update(details or {})
        super().__init__("tool_call_parse", message, cause=cause, details=info)
        self.problem: ParseProblem = problem
        self.raw_text = raw_text
        self.raw_arguments = raw_arguments
        self.name = name


class ToolArgumentsError(ToolCallParseError):
    """A call's arguments break its tool's JSON Schema; ``issues`` lists every violation."""

    def __init__(
        self, name: str, issues: Sequence[SchemaIssue], *, raw_arguments: str, index: int = 0
    ):
        shown = "; ".join(f"{i.path}: {i.message}" for i in issues[:6])
        more = f" (+{len(issues) - 6} more)" if len(issues) > 6 else ""
        super().__init__(
            "invalid_arguments",
            f"tool call #{index + 1} {name!r}: arguments do not match the schema: {shown}{more}",
            raw_arguments=raw_arguments,
            name=name,
            details={"errors": [asdict(i) for i in issues]},
        )
        self.issues = tuple(issues)


class StructuredOutputError(GenerateTaskError):
    """The reply is not JSON, or its JSON breaks the schema (``json_schema_violation``).

    ``issues`` is empty when the text could not be parsed at all; ``data`` is the parsed
    value when it could.
    """

    def __init__(
        self,
        message: str,
        *,
        text: str,
        issues: Sequence[SchemaIssue] = (),
        data: Any = None,
        parsed: bool = False,
        cause: BaseException | None = None,
    ):
        details: dict[str, Any] = {"text": text, "errors": [asdict(i) for i in issues]}
        if parsed:
            details["json_data"] = data
        super().__init__("json_schema_violation", message, cause=cause, details=details)
        self.text = text
        self.issues = tuple(issues)
        self.data = data


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


class NotTrusted(Exception):
    """Internal: a stored value the trusted read path (``models._trusted``) does not vouch for
    (a type validation would coerce, a key spelled by attribute name): the record is validated."""


class NotPlannable(Exception):
    """Internal: a model class whose validation the trusted read path does not reproduce (a
    validator, a constraint, an annotation it does not know): its records are validated."""
