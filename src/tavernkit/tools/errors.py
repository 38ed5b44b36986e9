"""Typed errors of the tool layer; all are :class:`~tavernkit.errors.GenerateTaskError`.

Each carries what a caller (or a corrective retry) needs: the diagnostic category, the
model's raw text or arguments, and for schema failures the list of ``(path, message)``.
"""

from __future__ import annotations

from tavernkit.errors import ParseProblem as ParseProblem
from tavernkit.errors import SchemaIssue as SchemaIssue
from tavernkit.errors import StructuredOutputError as StructuredOutputError
from tavernkit.errors import ToolArgumentsError as ToolArgumentsError
from tavernkit.errors import ToolCallParseError as ToolCallParseError

__all__ = [
    "ParseProblem",
    "SchemaIssue",
    "StructuredOutputError",
    "ToolArgumentsError",
    "ToolCallParseError",
]
