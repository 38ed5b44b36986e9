"""Typed errors of the tool layer; all are :class:`~tavernkit.errors.GenerateTaskError`.

Each carries what a caller (or a corrective retry) needs: the diagnostic category, the
model's raw text or arguments, and for schema failures the list of ``(path, message)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from tavernkit.errors import GenerateTaskError

__all__ = [
    "ParseProblem",
    "SchemaIssue",
    "StructuredOutputError",
    "ToolArgumentsError",
    "ToolCallParseError",
]

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
