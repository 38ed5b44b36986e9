"""The normalized tool call every mode produces (native, prompt_xml, prompt_json).

``ToolCall(name, args, raw)`` is the shape of ``TaskResult.tool_calls``: ``args`` is already
a parsed JSON object, ``raw`` is the sender's original call (for the prompt protocols, the
OpenAI-shaped call built from the parsed text), and ``id`` is the provider's call id (a
deterministic one for the prompt protocols, so runs replay the same).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tavernkit.tools.errors import ToolCallParseError
from tavernkit.tools.identity import call_identity, canonical_json

__all__ = ["ToolCall", "coerce_tool_call", "decode_arguments", "openai_tool_call"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the model asked for, arguments parsed."""

    name: str
    args: dict[str, Any]
    raw: Any = None
    id: str = ""
    #: the arguments as the model sent them (JSON text), for error reports and storage
    arguments_text: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def identity(self) -> str:
        return call_identity(self.name, self.args)

    def to_openai(self) -> dict[str, Any]:
        """The call as an OpenAI ``tool_calls[]`` entry (what history carries)."""
        return openai_tool_call(self.id, self.name, self.args)


def openai_tool_call(call_id: str, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": canonical_json(dict(args))},
    }


def decode_arguments(name: str, arguments: Any) -> dict[str, Any]:
    """Arguments as a JSON object; empty means ``{}``. Anything else that is not an object
    (``'{bad'``, ``'null'``, ``'[]'``, ``'1'``) is ``tool_call_parse`` carrying the raw text."""
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            value = json.loads(arguments)
        except ValueError as exc:
            raise ToolCallParseError(
                "bad_json",
                f"tool call {name!r}: arguments are not valid JSON: {exc}",
                cause=exc,
                name=name,
                raw_arguments=arguments,
            ) from exc
        if isinstance(value, dict):
            return value
        arguments_text = arguments
    else:
        arguments_text = repr(arguments)
    raise ToolCallParseError(
        "bad_shape",
        f"tool call {name!r}: arguments must be a JSON object",
        name=name,
        raw_arguments=arguments_text,
    )


def coerce_tool_call(value: Any, index: int = 0) -> ToolCall:
    """A :class:`ToolCall` from any call shape a sender hands back.

    Accepted: a ``ToolCall``; an OpenAI ``{"id", "function": {"name", "arguments"}}`` dict;
    a flat ``{"name", "arguments"|"args"|"input"}`` dict (Anthropic, Gemini); an object with
    ``name`` and ``arguments`` attributes (the provider layer's accumulated call).
    """
    if isinstance(value, ToolCall):
        return value
    if isinstance(value, Mapping):
        fn = value.get("function")
        source: Mapping[str, Any] = fn if isinstance(fn, Mapping) else value
        name = source.get("name")
        arguments = next((source[k] for k in ("arguments", "args", "input") if k in source), None)
        call_id = value.get("id")
    else:
        name = getattr(value, "name", None)
        arguments = getattr(value, "arguments", None)
        call_id = getattr(value, "id", None)
    if not isinstance(name, str) or not name:
        raise ToolCallParseError(
            "bad_shape",
            f"tool call #{index + 1} has no function name",
            details={"raw_call": repr(value)[:2000]},
        )
    args = decode_arguments(name, arguments)
    text = arguments if isinstance(arguments, str) else canonical_json(args)
    return ToolCall(
        name=name,
        args=args,
        raw=value,
        id=call_id if isinstance(call_id, str) else "",
        arguments_text=text,
    )
