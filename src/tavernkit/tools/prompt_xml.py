"""The ``<function_calls>`` protocol (prompt_xml).

After the trigger line the model writes::

    <function_calls>
    <function_call>
      <tool>NAME</tool>
      <args_json><![CDATA[{"arg": "value"}]]></args_json>
    </function_call>
    </function_calls>

Model output is not well-formed XML, so this reads it with a small CDATA-aware scanner rather
than an XML parser: a ``</...>`` inside CDATA does not close anything, ``]]>`` inside the
arguments is written split across two CDATA sections, and prose around the block is ignored.
Arguments are parsed strictly (no repair): the CDATA wrapper leaves a model no reason to
write broken JSON, and a corrective retry is cheaper than guessing what it meant.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from tavernkit.tools.errors import ToolCallParseError
from tavernkit.tools.identity import canonical_json
from tavernkit.tools.protocol import PromptProtocol

__all__ = ["XmlProtocol", "cdata", "xml_escape", "xml_unescape"]

_ENTITY = re.compile(r"&(lt|gt|amp|quot|apos|#[0-9]+|#[xX][0-9a-fA-F]+);")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}
_CDATA_OPEN = "<![CDATA["
_CDATA_CLOSE = "]]>"


def xml_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _entity(m: re.Match[str]) -> str:
    body = m.group(1)
    if body in _NAMED:
        return _NAMED[body]
    try:
        code = int(body[2:], 16) if body[1] in "xX" else int(body[1:])
        return chr(code)
    except (ValueError, OverflowError):
        return m.group(0)


def xml_unescape(text: str) -> str:
    return _ENTITY.sub(_entity, text)


def cdata(text: str) -> str:
    """``text`` in CDATA; ``]]>`` inside is split across two sections so it survives."""
    return _CDATA_OPEN + text.replace("]]>", "]]]]><![CDATA[>") + _CDATA_CLOSE


def _open(tag: str) -> re.Pattern[str]:
    return re.compile(rf"<\s*{tag}\s*>", re.IGNORECASE)


def _close_or_cdata(tag: str) -> re.Pattern[str]:
    return re.compile(rf"(?P<cdata><!\[CDATA\[)|</\s*{tag}\s*>", re.IGNORECASE)


_OPEN_CALLS = _open("function_calls")
_OPEN_CALL = _open("function_call")
_OPEN_TOOL = _open("tool")
_OPEN_ARGS = _open("args_json")
_CLOSERS = {
    tag: _close_or_cdata(tag) for tag in ("function_calls", "function_call", "tool", "args_json")
}


def _find_close(text: str, tag: str, start: int) -> re.Match[str] | None:
    """The closing tag after ``start``, skipping CDATA sections; an unterminated CDATA
    section is ``bad_cdata``."""
    pattern = _CLOSERS[tag]
    pos = start
    while True:
        m = pattern.search(text, pos)
        if m is None:
            return None
        if m.group("cdata") is None:
            return m
        end = text.find(_CDATA_CLOSE, m.end())
        if end < 0:
            raise ToolCallParseError(
                "bad_cdata", f"unterminated <![CDATA[ section inside <{tag}> (missing ]]>)"
            )
        pos = end + len(_CDATA_CLOSE)


def _elements(text: str, tag: str, what: str) -> list[str]:
    """The inner text of every ``<tag>…</tag>`` in ``text``."""
    out = []
    pos = 0
    while (m := _open(tag).search(text, pos)) is not None:
        close = _find_close(text, tag, m.end())
        if close is None:
            raise ToolCallParseError("malformed_xml", f"Missing closing </{tag}> tag{what}.")
        out.append(text[m.end() : close.start()])
        pos = close.end()
    return out


def _uncdata(payload: str, label: str) -> str:
    """Concatenate CDATA contents (verbatim) and the text between them (entity-decoded)."""
    out = []
    pos = 0
    while (start := payload.find(_CDATA_OPEN, pos)) >= 0:
        out.append(xml_unescape(payload[pos:start]))
        end = payload.find(_CDATA_CLOSE, start + len(_CDATA_OPEN))
        if end < 0:
            raise ToolCallParseError(
                "bad_cdata", f"{label}: unterminated <![CDATA[ section (missing ]]>)"
            )
        out.append(payload[start + len(_CDATA_OPEN) : end])
        pos = end + len(_CDATA_CLOSE)
    out.append(xml_unescape(payload[pos:]))
    return "".join(out)


class XmlProtocol(PromptProtocol):
    """prompt_xml: the trigger line, then one ``<function_calls>`` block with CDATA args."""

    mode: ClassVar[str] = "prompt_xml"
    _format_rules: ClassVar[tuple[str, ...]] = (
        "Begin a new line with exactly {trigger} (on its own line, only once).",
        "Immediately after the trigger line, output one complete <function_calls> block.",
        "Put every <function_call> inside that single <function_calls> wrapper; each has one "
        "<tool> with the exact tool name and one <args_json> holding a JSON object wrapped in "
        "<![CDATA[...]]>.",
        "Write nothing after </function_calls>.",
    )
    _mistakes: ClassVar[tuple[str, ...]] = (
        "prose or markdown between the trigger line and <function_calls>",
        'a ```json fence or a {"tool_calls": [...]} object instead of the XML block',
        "a missing closing tag (</args_json>, </function_call>, </function_calls>)",
        "arguments that are not one JSON object, or that are not wrapped in <![CDATA[...]]>",
        "tool names or argument keys that differ from the definitions",
    )

    def render_calls(self, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
        blocks = [
            "<function_call>\n"
            f"  <tool>{xml_escape(name)}</tool>\n"
            f"  <args_json>{cdata(canonical_json(dict(args)))}</args_json>\n"
            "</function_call>"
            for name, args in calls
        ]
        return "\n".join([self.trigger, "<function_calls>", *blocks, "</function_calls>"])

    def _looks_like_payload(self, text: str) -> bool:
        return _OPEN_CALLS.search(text) is not None or _OPEN_CALL.search(text) is not None

    def parse_payload(self, payload: str) -> list[tuple[str, Any, str]]:
        blocks = _elements(payload, "function_calls", "")
        if not blocks:
            hint = (
                " (<function_call> must be inside a <function_calls> wrapper)"
                if _OPEN_CALL.search(payload)
                else ""
            )
            raise ToolCallParseError(
                "missing_block", f"Missing <function_calls> tag after trigger signal{hint}."
            )
        calls: list[tuple[str, Any, str]] = []
        for block in blocks:
            items = _elements(block, "function_call", "")
            if not items:
                raise ToolCallParseError(
                    "malformed_xml", "No <function_call> blocks found inside <function_calls>."
                )
            for item in items:
                calls.append(self._one(item, len(calls) + 1))
        return calls

    def _one(self, item: str, number: int) -> tuple[str, Any, str]:
        tools = _elements(item, "tool", f" in tool call #{number}")
        if not tools:
            raise ToolCallParseError("malformed_xml", f"Tool call #{number} is missing <tool>.")
        name = xml_unescape(_uncdata(tools[0], f"tool call #{number} <tool>")).strip()
        if not name:
            raise ToolCallParseError("malformed_xml", f"Tool call #{number} has an empty <tool>.")
        args_open = _OPEN_ARGS.search(item)
        if args_open is None:
            raise ToolCallParseError(
                "malformed_xml", f"Tool call #{number} ({name}) is missing <args_json>.", name=name
            )
        close = _find_close(item, "args_json", args_open.end())
        if close is None:
            raise ToolCallParseError(
                "malformed_xml",
                f"Missing closing </args_json> tag in tool call #{number} ({name}).",
                name=name,
            )
        raw = item[args_open.end() : close.start()]
        text = _uncdata(raw, f"tool call #{number} ({name}) <args_json>").strip()
        if not text:
            return name, {}, "{}"
        try:
            args = json.loads(text)
        except ValueError as exc:
            raise ToolCallParseError(
                "bad_json",
                f"Invalid JSON in <args_json> of tool call #{number} ({name}): {exc}",
                name=name,
                raw_arguments=text,
                cause=exc,
            ) from exc
        if not isinstance(args, dict):
            raise ToolCallParseError(
                "bad_json",
                f"<args_json> of tool call #{number} ({name}) must decode to a JSON object, "
                f"got {type(args).__name__}",
                name=name,
                raw_arguments=text,
            )
        return name, args, text
