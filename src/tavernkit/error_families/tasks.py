"""What ``generate_task`` and chat turns raise: :class:`GenerateTaskError` (one ``code`` a caller
switches on), :class:`ChatTurnError`, and the tool-call and structured-output kinds.

Import these from :mod:`tavernkit.errors` (or ``tavernkit``), which re-exports every one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

from tavernkit.error_families.base import TavernKitError

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
