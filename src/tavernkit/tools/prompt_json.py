"""The JSON protocol (prompt_json): a real JSON answer, not an alias of the XML one.

After the trigger line the model writes one fenced JSON object::

    ```json
    {"tool_calls": [{"name": "NAME", "arguments": {"arg": "value"}}]}
    ```

Reading is strict first. Only when strict parsing fails is json-repair tried, and only on a
complete payload (a closed fence, or a bare object): repairing a truncated reply would run a
tool with arguments the model never finished. Whatever comes out is type-checked: an object
with a non-empty ``tool_calls`` list of ``{"name": str, "arguments": object}`` (arguments may
also be a JSON string holding an object, as OpenAI's wire format writes them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import json_repair

from tavernkit.tools.errors import ToolCallParseError
from tavernkit.tools.identity import canonical_json
from tavernkit.tools.protocol import PromptProtocol

__all__ = ["JsonProtocol", "fenced_body", "load_json_lenient"]

_FENCE_OPEN = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\r?\n?")


def load_json_lenient(text: str) -> tuple[Any, bool]:
    """``(value, repaired)``: strict ``json`` first, json-repair only when that fails.

    json-repair answers ``''`` for anything that is not JSON at all, so an empty string
    from it is a failure, never a value. Raises ``ValueError`` with the strict parser's
    complaint when neither reads it.
    """
    try:
        return json.loads(text), False
    except ValueError as strict:
        try:
            value = json_repair.loads(text)
        except Exception as exc:  # json-repair raises assorted types on odd input
            raise ValueError(str(strict)) from exc
        if value == "" or value is None:
            raise ValueError(str(strict)) from strict
        return value, True


_DECODER = json.JSONDecoder()
_CLOSE_LINE = re.compile(r"^[ \t]*```[ \t]*$", re.MULTILINE)


def fenced_body(text: str, start: int) -> str | None:
    """The body of the fence whose content starts at ``start``; ``None`` when it never closes.

    A JSON value that decodes strictly and is followed by the closing fence ends where the
    value ends, so a string holding backticks cannot cut it short; otherwise the fence closes
    at a line of its own, else at the next backticks.
    """
    body = start + len(text[start:]) - len(text[start:].lstrip())
    try:
        _, end = _DECODER.raw_decode(text, body)
    except ValueError:
        pass
    else:
        if text[end:].lstrip().startswith("```"):
            return text[body:end]
    line = _CLOSE_LINE.search(text, start)
    if line is not None:
        return text[start : line.start()].strip()
    close = text.find("```", start)
    return None if close < 0 else text[start:close].strip()


def _extract(payload: str) -> str:
    """The JSON text of the payload: the first fenced block, else a bare object."""
    fence = _FENCE_OPEN.search(payload)
    if fence is not None:
        body = fenced_body(payload, fence.end())
        if body is None:
            raise ToolCallParseError(
                "bad_json", "the ```json fence after the trigger line is never closed"
            )
        return body
    start = payload.find("{")
    if start < 0:
        raise ToolCallParseError("missing_block", "no fenced JSON object after the trigger line")
    return payload[start:].strip()


def _arguments(value: Any, name: str, number: int) -> tuple[dict[str, Any], str]:
    if value is None:
        return {}, "{}"
    if isinstance(value, str):
        if not value.strip():
            return {}, "{}"
        try:
            decoded = json.loads(value)
        except ValueError as exc:
            raise ToolCallParseError(
                "bad_json",
                f'tool call #{number} ({name}): "arguments" is a string that is not JSON: {exc}',
                name=name,
                raw_arguments=value,
                cause=exc,
            ) from exc
        if isinstance(decoded, dict):
            return decoded, value
        value = decoded
    if not isinstance(value, dict):
        raise ToolCallParseError(
            "bad_shape",
            f'tool call #{number} ({name}): "arguments" must be a JSON object, '
            f"got {type(value).__name__}",
            name=name,
            raw_arguments=json.dumps(value, ensure_ascii=False),
        )
    return value, canonical_json(value)


class JsonProtocol(PromptProtocol):
    """prompt_json: the trigger line, then one fenced ``{"tool_calls": [...]}`` object."""

    mode: ClassVar[str] = "prompt_json"
    _format_rules: ClassVar[tuple[str, ...]] = (
        "Begin a new line with exactly {trigger} (on its own line, only once).",
        "Immediately after the trigger line, output one ```json fenced block holding exactly "
        'one JSON object of the form {{"tool_calls": [{{"name": "TOOL_NAME", "arguments": '
        "{{...}}}}]}}.",
        'Put every call in that one "tool_calls" list; "arguments" is a JSON object with the '
        "exact argument keys.",
        "Close the fence and write nothing after it.",
    )
    _mistakes: ClassVar[tuple[str, ...]] = (
        "prose between the trigger line and the ```json fence",
        "XML tags such as <function_calls> instead of the JSON object",
        "an unclosed fence, trailing commas, comments or single quotes in the JSON",
        '"arguments" that is not a JSON object, or a missing "name"',
        "several JSON objects or several fences instead of one",
    )

    def render_calls(self, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
        body = {"tool_calls": [{"name": n, "arguments": dict(a)} for n, a in calls]}
        text = json.dumps(body, ensure_ascii=False)
        return f"{self.trigger}\n```json\n{text}\n```"

    def _looks_like_payload(self, text: str) -> bool:
        return '"tool_calls"' in text

    def parse_payload(self, payload: str) -> list[tuple[str, Any, str]]:
        text = _extract(payload)
        try:
            value, _repaired = load_json_lenient(text)
        except ValueError as exc:
            raise ToolCallParseError(
                "bad_json",
                f"the JSON after the trigger line is invalid: {exc}",
                raw_arguments=text,
                cause=exc,
            ) from exc
        if not isinstance(value, dict) or not isinstance(value.get("tool_calls"), list):
            raise ToolCallParseError(
                "bad_shape",
                'expected one JSON object {"tool_calls": [...]}, got '
                + (
                    f"an object with keys {sorted(value)}"
                    if isinstance(value, dict)
                    else type(value).__name__
                ),
                raw_arguments=text,
            )
        entries = value["tool_calls"]
        if not entries:
            raise ToolCallParseError("no_calls", '"tool_calls" is empty', raw_arguments=text)
        out: list[tuple[str, Any, str]] = []
        for number, entry in enumerate(entries, 1):
            if not isinstance(entry, dict):
                raise ToolCallParseError(
                    "bad_shape",
                    f'tool call #{number} must be an object with "name" and "arguments"',
                    raw_arguments=text,
                )
            name = entry.get("name")
            if not isinstance(name, str) or not name.strip():
                raise ToolCallParseError(
                    "bad_shape", f'tool call #{number} has no "name" string', raw_arguments=text
                )
            args, raw = _arguments(entry.get("arguments"), name.strip(), number)
            out.append((name.strip(), args, raw))
        return out
