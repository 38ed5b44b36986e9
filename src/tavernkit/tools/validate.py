"""Argument validation (JSON Schema draft 2020-12) and tool_choice enforcement.

The schema checks themselves (formats asserted) are :mod:`tavernkit.tools.json_schema`'s,
which imports jsonschema on the first check. ``tool_choice`` and
``required_function_name`` are enforced here for every mode, so a required call that never
came is an error (``tool_call_missing``), never silent text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import tavernkit.tools.json_schema as json_schema
from tavernkit.errors import GenerateTaskError
from tavernkit.tools._catalogue import ToolLike
from tavernkit.tools.calls import ToolCall
from tavernkit.tools.errors import ToolArgumentsError, ToolCallParseError
from tavernkit.tools.identity import canonical_json

__all__ = [
    "ToolChoiceSpec",
    "enforce_tool_choice",
    "is_tool_call_mandatory",
    "normalize_tool_choice",
    "resolve_required_function_name",
    "validate_arguments",
    "validate_calls",
]


def validate_arguments(
    tool: ToolLike, args: Any, *, raw_arguments: str | None = None, index: int = 0
) -> None:
    """Raise :class:`ToolArgumentsError` (with every violation and the raw arguments) when
    ``args`` break ``tool.parameters``."""
    validator = json_schema.schema_validator(
        tool.parameters, field=f"tool {tool.name!r} parameters"
    )
    issues = json_schema.schema_issues(validator, args)
    if issues:
        raw = raw_arguments if raw_arguments is not None else _safe_dump(args)
        raise ToolArgumentsError(tool.name, issues, raw_arguments=raw, index=index)


def _safe_dump(value: Any) -> str:
    try:
        return canonical_json(value)
    except (TypeError, ValueError):
        return repr(value)


def validate_calls(calls: Sequence[ToolCall], tools: Sequence[ToolLike]) -> None:
    """Every call names a known tool and its arguments match that tool's schema."""
    by_name = {tool.name: tool for tool in tools}
    for index, call in enumerate(calls):
        tool = by_name.get(call.name)
        if tool is None:
            raise ToolCallParseError(
                "unknown_function",
                f"tool call #{index + 1} names unknown function {call.name!r}; available: "
                + (", ".join(by_name) or "(none)"),
                name=call.name,
                raw_arguments=call.arguments_text or _safe_dump(call.args),
            )
        validate_arguments(tool, call.args, raw_arguments=call.arguments_text or None, index=index)


@dataclass(frozen=True, slots=True)
class ToolChoiceSpec:
    """``tool_choice`` normalized: ``none``, ``auto``, ``required`` or ``named`` (with name)."""

    mode: Literal["none", "auto", "required", "named"] = "auto"
    name: str | None = None


def normalize_tool_choice(value: Any) -> ToolChoiceSpec:
    """Accepts ``None``/``"auto"``, ``"none"``, ``"required"`` (``"any"`` is Anthropic's word
    for it), ``{"type": "function", "function": {"name": N}}``, ``{"name": N}``, and a
    ``ToolChoiceSpec``. Anything else is ``invalid_input``."""
    if isinstance(value, ToolChoiceSpec):
        return value
    if value is None:
        return ToolChoiceSpec("auto")
    if isinstance(value, str):
        word = value.strip().lower()
        if word in ("", "auto"):
            return ToolChoiceSpec("auto")
        if word == "none":
            return ToolChoiceSpec("none")
        if word in ("required", "any"):
            return ToolChoiceSpec("required")
    elif isinstance(value, Mapping):
        fn = value.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else value.get("name")
        if isinstance(name, str) and name.strip():
            return ToolChoiceSpec("named", name.strip())
    raise GenerateTaskError(
        "invalid_input",
        f"unsupported tool_choice {value!r}; expected 'auto', 'none', 'required' or "
        "{'type': 'function', 'function': {'name': ...}}",
        details={"field": "tool_choice"},
    )


def resolve_required_function_name(choice: ToolChoiceSpec, option: str | None) -> str | None:
    """``function_call_options.required_function_name`` wins, else a named tool_choice."""
    if option and option.strip():
        return option.strip()
    return choice.name if choice.mode == "named" else None


def is_tool_call_mandatory(choice: ToolChoiceSpec, required_function_name: str | None) -> bool:
    return choice.mode in ("required", "named") or bool(required_function_name)


def enforce_tool_choice(
    calls: Sequence[ToolCall],
    choice: ToolChoiceSpec,
    *,
    required_function_name: str | None = None,
    available: Sequence[str] | None = None,
) -> list[ToolCall]:
    """The calls that satisfy ``tool_choice``, or an error.

    * ``none``: any call is ``tool_call_parse`` (the model was told not to call).
    * ``named``: calls to other tools are dropped (the caller forced one function).
    * ``required`` / ``named`` / ``required_function_name``: no matching call is
      ``tool_call_missing``.
    * A named choice or required name that is not among ``available`` is ``invalid_input``.
    """
    for wanted in (choice.name, required_function_name):
        if wanted and available is not None and wanted not in available:
            raise GenerateTaskError(
                "invalid_input",
                f"required tool {wanted!r} is not among the tools of this request",
                details={"field": "tool_choice", "name": wanted},
            )
    if choice.mode == "none":
        if calls:
            raise ToolCallParseError(
                "unknown_function",
                "tool_choice is 'none' but the model called "
                + ", ".join(repr(c.name) for c in calls),
                name=calls[0].name,
            )
        return []
    kept = [c for c in calls if c.name == choice.name] if choice.mode == "named" else list(calls)
    if choice.mode in ("required", "named") and not kept:
        what = f"tool {choice.name!r}" if choice.name else "a tool"
        raise GenerateTaskError(
            "tool_call_missing",
            f"tool_choice requires {what} but the model made no such call",
            details={
                "tool_choice": choice.mode,
                "name": choice.name,
                "called": [c.name for c in calls],
            },
        )
    if required_function_name and not any(c.name == required_function_name for c in kept):
        raise GenerateTaskError(
            "tool_call_missing",
            f"required function {required_function_name!r} was not called",
            details={"name": required_function_name, "called": [c.name for c in calls]},
        )
    return kept
