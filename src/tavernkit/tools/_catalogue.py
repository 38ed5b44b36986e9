"""The tool catalogue written into the prompt protocols, in two styles.

``json_schema`` spells out every parameter (type, required, enum, constraints), recursing into
nested objects and array items, because small models follow a flat list better than a raw
schema. ``table`` is a compact listing for tools with simple arguments.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

__all__ = ["ToolLike", "render_tool_guide", "tool_choice_line"]

_CONSTRAINT_KEYS = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minItems",
    "maxItems",
    "uniqueItems",
)


class ToolLike(Protocol):
    """What the protocols need of a tool (a FunctionTool, or any spec with these fields)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def parameters(self) -> Mapping[str, Any]: ...


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _type_of(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind
    if isinstance(kind, list) and kind:
        return "|".join(str(k) for k in kind)
    if "properties" in schema:
        return "object"
    if "enum" in schema:
        return "enum"
    return "any"


def _required(schema: Mapping[str, Any]) -> list[str]:
    req = schema.get("required")
    return [r for r in req if isinstance(r, str)] if isinstance(req, list) else []


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    props = schema.get("properties")
    return props if isinstance(props, Mapping) else {}


def _describe(path: str, schema: Mapping[str, Any], required: bool, out: list[str]) -> None:
    out.append(f"- {path}:")
    out.append(f"  - type: {_type_of(schema)}")
    out.append(f"  - required: {'Yes' if required else 'No'}")
    if isinstance(schema.get("description"), str) and schema["description"].strip():
        out.append(f"  - description: {_one_line(schema['description'])}")
    if "enum" in schema:
        out.append(f"  - enum: {_dump(schema['enum'])}")
    if "const" in schema:
        out.append(f"  - const: {_dump(schema['const'])}")
    if "default" in schema:
        out.append(f"  - default: {_dump(schema['default'])}")
    if isinstance(schema.get("examples"), list):
        out.append(f"  - examples: {_dump(schema['examples'])}")
    elif "example" in schema:
        out.append(f"  - example: {_dump(schema['example'])}")
    constraints = {k: schema[k] for k in _CONSTRAINT_KEYS if k in schema}
    items = schema.get("items")
    if isinstance(items, Mapping) and isinstance(items.get("type"), str):
        constraints["items.type"] = items["type"]
    if constraints:
        out.append(f"  - constraints: {_dump(constraints)}")
    inner = _required(schema)
    for name, sub in _properties(schema).items():
        if isinstance(sub, Mapping):
            _describe(f"{path}.{name}", sub, name in inner, out)
    if isinstance(items, Mapping):
        item_required = _required(items)
        for name, sub in _properties(items).items():
            if isinstance(sub, Mapping):
                _describe(f"{path}[].{name}", sub, name in item_required, out)


def _schema_entry(index: int, tool: ToolLike) -> str:
    schema = tool.parameters
    required = _required(schema)
    props = _properties(schema)
    optional = [name for name in props if name not in required]
    details: list[str] = []
    if "additionalProperties" in schema:
        details.append(
            f"Schema rules: additionalProperties={_dump(schema['additionalProperties'])}"
        )
    for name, sub in props.items():
        if isinstance(sub, Mapping):
            _describe(name, sub, name in required, details)
    if not details:
        details.append("(no parameter details)")
    lines = [
        f'{index}. <tool name="{tool.name}">',
        f"   Description: {_one_line(tool.description) or '-'}",
        f"   Required parameters: {', '.join(required) or '-'}",
        f"   Optional parameters: {', '.join(optional) or '-'}",
        "   Parameter details:",
        *details,
        "</tool>",
    ]
    return "\n".join(lines)


def _table_args(names: Sequence[str], props: Mapping[str, Any]) -> str:
    parts = []
    for name in names:
        sub = props.get(name)
        sub = sub if isinstance(sub, Mapping) else {}
        desc = sub.get("description")
        text = f"{name} ({_type_of(sub)})"
        if isinstance(desc, str) and desc.strip():
            text += f": {_one_line(desc)}"
        parts.append(text)
    return "; ".join(parts) or "-"


def _table_entry(index: int, tool: ToolLike) -> str:
    schema = tool.parameters
    props = _properties(schema)
    required = _required(schema)
    optional = [name for name in props if name not in required]
    return "\n".join(
        [
            f'{index}. <tool name="{tool.name}">',
            f"  <required_args>{_table_args(required, props)}</required_args>",
            f"  <optional_args>{_table_args(optional, props)}</optional_args>",
            f"  <purpose>{_one_line(tool.description) or '-'}</purpose>",
            "</tool>",
        ]
    )


def render_tool_guide(tools: Sequence[ToolLike], style: str = "json_schema") -> str:
    """One numbered entry per tool, separated by blank lines."""
    entry = _table_entry if style == "table" else _schema_entry
    return "\n\n".join(entry(i, tool) for i, tool in enumerate(tools, 1))


def tool_choice_line(mode: str, name: str | None, available: Sequence[str]) -> str | None:
    """The tool-choice constraint sentence (``None`` for ``auto``)."""
    if mode == "none":
        return "Tool-choice constraint: do NOT call any tool in this response."
    if mode == "required":
        return "Tool-choice constraint: you MUST call at least one allowed tool in this response."
    if mode == "named" and name:
        if name in available:
            return f"Tool-choice constraint: call ONLY tool '{name}' in this response."
        return (
            f"Tool-choice constraint: requested tool '{name}' is unavailable. "
            "Use only allowed tools."
        )
    return None
