"""A draft 2020-12 validator for a schema, and an instance's violations, ordered by path.

Formats (``email``, ``date-time``…) are asserted: without a ``FormatChecker`` jsonschema only
annotates them, and a tool that declares ``format`` means it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker  # type: ignore[import-untyped]
from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]

from tavernkit.errors import GenerateTaskError
from tavernkit.tools.errors import SchemaIssue

__all__ = ["schema_issues", "schema_validator"]


def _json_path(parts: Iterable[Any]) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def schema_validator(schema: Mapping[str, Any], *, field: str = "parameters") -> Any:
    """A draft 2020-12 validator asserting formats; a broken schema is ``invalid_input``."""
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise GenerateTaskError(
            "invalid_input",
            f"{field} is not a valid JSON Schema: {exc.message}",
            cause=exc,
            details={"field": field, "schema_path": _json_path(exc.absolute_path)},
        ) from exc
    return Draft202012Validator(schema, format_checker=FormatChecker())


def schema_issues(validator: Any, instance: Any) -> list[SchemaIssue]:
    """Every violation, ordered by path so reports are stable."""
    errors = sorted(
        validator.iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path]
    )
    return [
        SchemaIssue(path=_json_path(e.absolute_path), message=e.message, keyword=str(e.validator))
        for e in errors
    ]
