"""Structured output: read a reply as JSON and hold it to the caller's schema.

Order: strict JSON of the whole reply, then strict JSON of a ```json fence in it, then
json-repair (only when both strict reads fail), then JSON-Schema validation (draft 2020-12,
formats asserted). The reference front end stops after parsing; a caller that passes a schema
means it, so data that parses but breaks the schema is ``json_schema_violation`` with every
``(path, message)``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import tavernkit.tools.json_schema as json_schema
from tavernkit.errors import GenerateTaskError
from tavernkit.tools.errors import StructuredOutputError
from tavernkit.tools.prompt_json import fenced_body, load_json_lenient

__all__ = ["StructuredResult", "parse_structured", "schema_instruction", "unwrap_json_schema"]

_FENCE_OPEN = re.compile(r"```[ \t]*(?:json|JSON|json5)?[ \t]*\r?\n")
_WRAPPER_KEYS = frozenset({"name", "description", "strict", "schema", "value"})


@dataclass(frozen=True, slots=True)
class StructuredResult:
    """The parsed data; ``repaired`` says json-repair was needed to read it."""

    data: Any
    repaired: bool = False
    source: str = "strict"


def unwrap_json_schema(value: Any) -> tuple[dict[str, Any], str, bool]:
    """``(schema, name, strict)`` from what callers pass as ``json_schema``.

    Accepted: a bare schema; SillyTavern's ``{"name", "description"?, "strict"?, "value":
    schema}``; OpenAI's ``{"name", "strict"?, "schema": schema}``. Anything that is not an
    object, or a schema that is not valid draft 2020-12, is ``invalid_input``.
    """
    if not isinstance(value, Mapping):
        raise GenerateTaskError(
            "invalid_input", "json_schema must be an object", details={"field": "json_schema"}
        )
    schema: Any = value
    name = "response"
    strict = True
    keys = set(value)
    if keys and keys <= _WRAPPER_KEYS:
        inner = value.get("value", value.get("schema"))
        if isinstance(inner, Mapping):
            schema = inner
            if isinstance(value.get("name"), str) and value["name"].strip():
                name = value["name"].strip()
            if isinstance(value.get("strict"), bool):
                strict = value["strict"]
    json_schema.schema_validator(schema, field="json_schema")
    return dict(schema), name, strict


def _strict_candidates(text: str) -> list[tuple[str, str]]:
    out = [("strict", text.strip())]
    for m in _FENCE_OPEN.finditer(text):
        body = fenced_body(text, m.end())
        if body is not None:
            out.append(("fence", body))
    return out


def parse_structured(text: str, schema: Mapping[str, Any] | None) -> StructuredResult:
    """The reply's JSON, validated against ``schema`` (``None``: any JSON).

    An empty reply is ``no_response``; unreadable JSON and schema violations are
    :class:`StructuredOutputError` (``json_schema_violation``) with the text, and for
    violations the parsed data and every issue.
    """
    if not text.strip():
        raise GenerateTaskError("no_response", "the model returned an empty reply")
    result: StructuredResult | None = None
    for source, candidate in _strict_candidates(text):
        try:
            result = StructuredResult(json.loads(candidate), False, source)
            break
        except ValueError:
            continue
    if result is None:
        fences = [c for s, c in _strict_candidates(text) if s == "fence"]
        try:
            data, _ = load_json_lenient(fences[0] if fences else text)
        except ValueError as exc:
            raise StructuredOutputError(
                f"the reply is not valid JSON: {exc}", text=text, cause=exc
            ) from exc
        result = StructuredResult(data, True, "repair")
    if schema is not None:
        validator = json_schema.schema_validator(schema, field="json_schema")
        issues = json_schema.schema_issues(validator, result.data)
        if issues:
            shown = "; ".join(f"{i.path}: {i.message}" for i in issues[:6])
            raise StructuredOutputError(
                f"the reply does not match the schema: {shown}",
                text=text,
                issues=issues,
                data=result.data,
                parsed=True,
            )
    return result


def schema_instruction(schema: Mapping[str, Any]) -> str:
    """The instruction for backends without native structured output."""
    return (
        "Respond with a single JSON value that validates against this JSON Schema. Output "
        "only the JSON: no prose, no markdown fence, no comments.\n"
        f"JSON Schema:\n{json.dumps(schema, ensure_ascii=False, indent=2)}"
    )
