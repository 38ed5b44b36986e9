"""SillyTavern's Anthropic and Gemini prompt converters (``convertClaudeMessages``,
``convertGooglePrompt`` in ``src/prompt-converters.js``, reference §2.5), as pure functions
over OpenAI-shaped messages; the input is never changed.

The provider adapters lay out their wire formats themselves from what
:func:`~tavernkit.prompt.postprocess.prepare_for_provider` gives them; these converters are
SillyTavern's full result (system blocks, ``tool_use``/``tool_result`` blocks, Gemini parts),
which the conformance tests hold the adapters' bodies against.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tavernkit.errors import FormatError
from tavernkit.prompt.postprocess import PROMPT_PLACEHOLDER, Message, PromptNames

__all__ = ["ClaudePrompt", "GooglePrompt", "convert_claude_messages", "convert_google_prompt"]


@dataclass(frozen=True, slots=True)
class ClaudePrompt:
    """The Messages API's ``messages`` and ``system`` blocks."""

    messages: list[Message]
    system: list[Message]


def _json_arguments(raw: Any, where: str) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise FormatError(
            f"tool call arguments are not valid JSON ({exc})", source="prompt", field=where
        ) from None


def _image_source(part: Mapping[str, Any]) -> dict[str, Any]:
    url = str((part.get("image_url") or {}).get("url") or "")
    head, comma, data = url.partition(",")
    scheme = head.split(";")[0]
    return {
        "type": "base64",
        "media_type": scheme.split(":")[1] if ":" in scheme else None,
        "data": data if comma else None,
    }


def convert_claude_messages(
    messages: Iterable[Mapping[str, Any]],
    names: PromptNames,
    *,
    prefill: str = "",
    use_system_prompt: bool = False,
    use_tools: bool = False,
    no_prefill: bool = False,
) -> ClaudePrompt:
    """SillyTavern's ``convertClaudeMessages`` (plus its thinking/prefill rule).

    With ``use_system_prompt`` the leading system messages become the system prompt (and a
    placeholder user message is sent when nothing else is left); every other system message is
    sent as a user message. Names go into the text, tool calls become ``tool_use`` and
    ``tool_result`` blocks (text when ``use_tools`` is off), images in assistant turns move to
    the next user turn, ``prefill`` is added as a final assistant turn (trailing spaces cut),
    and consecutive same-role turns are merged. ``no_prefill`` (extended thinking, or a model
    that refuses prefills) turns a trailing assistant turn into a user turn.
    """
    items = [copy.deepcopy(dict(m)) for m in messages]
    system: list[Message] = []
    if use_system_prompt:
        items, system = _claude_system(items, names)
    for index, message in enumerate(items):
        _to_claude_message(index, message, names)
    _move_assistant_images(items)
    if prefill:
        items.append({"role": "assistant", "content": [{"type": "text", "text": prefill.rstrip()}]})
    merged: list[Message] = []
    for message in items:
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1]["content"].extend(message["content"])
        else:
            merged.append(message)
    if not use_tools:
        _tool_blocks_as_text(merged)
    if no_prefill and merged and merged[-1]["role"] == "assistant":
        merged[-1]["role"] = "user"
    return ClaudePrompt(merged, system)


def _claude_system(items: list[Message], names: PromptNames) -> tuple[list[Message], list[Message]]:
    """The leading system messages as the system prompt's text blocks, and what is left (a
    placeholder user message when nothing is)."""
    system: list[Message] = []
    leading = 0
    while leading < len(items) and items[leading].get("role") == "system":
        item = items[leading]
        text = names.example_prefixed(str(item.get("content") or ""), item.get("name"))
        system.append({"type": "text", "text": text})
        leading += 1
    items = items[leading:]
    if not items:
        items.append({"role": "user", "content": PROMPT_PLACEHOLDER})
    return items, system


def _to_claude_message(index: int, message: Message, names: PromptNames) -> None:
    """One message in Claude's shape, in place: tool calls as ``tool_use`` blocks, tool
    results as a user turn's ``tool_result``, system messages as user turns, the speaker's
    name in the text, images as ``image`` blocks."""
    role = message.get("role")
    if role == "assistant" and message.get("tool_calls"):
        message["content"] = [
            {
                "type": "tool_use",
                "id": call.get("id"),
                "name": (call.get("function") or {}).get("name"),
                "input": _json_arguments(
                    (call.get("function") or {}).get("arguments"),
                    f"messages[{index}].tool_calls",
                ),
            }
            for call in message["tool_calls"]
        ]
    if role == "tool":
        message["role"] = role = "user"
        message["content"] = [
            {
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id"),
                "content": message.get("content"),
            }
        ]
    if role == "system":
        content = message.get("content")
        if isinstance(content, str):
            message["content"] = names.example_prefixed(content, message.get("name"))
        message["role"] = "user"
        message.pop("name", None)
    name = message.get("name")
    content = message.get("content")
    if isinstance(content, str) or content is None:
        text = content or ""
        message["content"] = [{"type": "text", "text": f"{name}: {text}" if name else text}]
    else:
        converted: list[dict[str, Any]] = []
        for part in content:
            if part.get("type") == "image_url":
                converted.append({"type": "image", "source": _image_source(part)})
            elif part.get("type") == "text":
                text = str(part.get("text") or "")
                text = f"{name}: {text}" if name else text
                converted.append({"type": "text", "text": text or "\u200b"})
            else:
                converted.append(dict(part))
        message["content"] = converted
    for key in ("name", "tool_calls", "tool_call_id"):
        message.pop(key, None)


def _move_assistant_images(items: list[Message]) -> None:
    """Images in an assistant turn move to the next user turn (a new one right after it when
    none follows), as Claude takes images from the user only."""
    i = 0
    while i < len(items):
        message = items[i]
        if message["role"] == "assistant" and any(
            c.get("type") == "image" for c in message["content"]
        ):
            j = i + 1
            while j < len(items) and items[j]["role"] != "user":
                j += 1
            if j >= len(items):
                # SillyTavern inserts the new user turn right after the assistant one.
                j = i + 1
                items.insert(j, {"role": "user", "content": []})
            items[j]["content"].extend(c for c in message["content"] if c.get("type") == "image")
            message["content"] = [c for c in message["content"] if c.get("type") != "image"]
        i += 1


def _tool_blocks_as_text(merged: list[Message]) -> None:
    """Tool calls and results as plain text blocks (tools off)."""
    for message in merged:
        for block in message["content"]:
            if block.get("type") == "tool_use":
                text = json.dumps(block.get("input"), ensure_ascii=False, separators=(",", ":"))
                block.clear()
                block.update({"type": "text", "text": text})
            elif block.get("type") == "tool_result":
                text = block.get("content")
                block.clear()
                block.update({"type": "text", "text": text})


# --- Gemini ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GooglePrompt:
    """Gemini's ``contents`` and ``system_instruction``."""

    contents: list[Message]
    system_instruction: dict[str, Any]


def _try_json(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        parsed = json.loads(raw)
    except ValueError:
        return raw
    return raw if parsed is None else parsed


def convert_google_prompt(
    messages: Iterable[Mapping[str, Any]],
    names: PromptNames,
    *,
    use_system_prompt: bool = False,
) -> GooglePrompt:
    """SillyTavern's ``convertGooglePrompt``.

    With ``use_system_prompt`` the leading system messages (all but a lone last one) become the
    system instruction. Other system and tool messages are user turns, assistant turns are
    ``model`` turns, names go into the text, tool calls and results become ``functionCall`` /
    ``functionResponse`` parts, and a turn with the same role as the one before is merged into
    it (its text appended to the first text part with a blank line).
    """
    items = [copy.deepcopy(dict(m)) for m in messages]
    system: list[str] = []
    if use_system_prompt:
        while len(items) > 1 and items[0].get("role") == "system":
            first = items.pop(0)
            system.append(
                names.example_prefixed(str(first.get("content") or ""), first.get("name"))
            )

    tool_names: dict[str, str] = {}
    contents: list[Message] = []
    for index, message in enumerate(items):
        role = message.get("role")
        role = "user" if role in ("system", "tool") else ("model" if role == "assistant" else role)
        parts_in = _google_parts_in(message)
        name = message.get("name")
        if name:
            _name_the_text(parts_in, name, names)
        parts = _google_parts(parts_in, tool_names)
        if index > 0 and contents and contents[-1]["role"] == role:
            _merge_google_parts(contents[-1]["parts"], parts)
        else:
            contents.append({"role": role, "parts": parts})

    return GooglePrompt(contents, {"parts": [{"text": text} for text in system]})


def _google_parts_in(message: Message) -> list[dict[str, Any]]:
    """The message's content as OpenAI-style parts (tool calls and a tool result as parts
    of their own kinds)."""
    content = message.get("content")
    if isinstance(content, list):
        return [dict(p) for p in content]
    if message.get("tool_calls"):
        return [{"type": "tool_calls", "tool_calls": message["tool_calls"]}]
    if isinstance(message.get("tool_call_id"), str) and message["tool_call_id"]:
        return [
            {
                "type": "tool_call_id",
                "tool_call_id": message["tool_call_id"],
                "content": "" if content is None else str(content),
            }
        ]
    return [{"type": "text", "text": "" if content is None else str(content)}]


def _name_the_text(parts_in: list[dict[str, Any]], name: str, names: PromptNames) -> None:
    """The speaker's name before each text part (an example's as SillyTavern writes it)."""
    for part in parts_in:
        if part.get("type") != "text":
            continue
        text = str(part.get("text") or "")
        if name in ("example_user", "example_assistant"):
            part["text"] = names.example_prefixed(text, name)
        elif not text.startswith(f"{name}: "):
            part["text"] = f"{name}: {text}"


def _google_parts(
    parts_in: list[dict[str, Any]], tool_names: dict[str, str]
) -> list[dict[str, Any]]:
    """Gemini's parts: text, ``functionResponse`` (named by the call it answers),
    ``functionCall`` (remembered in ``tool_names``), ``inlineData`` for images and inline
    videos."""
    parts: list[dict[str, Any]] = []
    for part in parts_in:
        kind = part.get("type")
        if kind == "text":
            parts.append({"text": part.get("text")})
        elif kind == "tool_call_id":
            fn = tool_names.get(part["tool_call_id"], "unknown")
            parts.append(
                {
                    "functionResponse": {
                        "name": fn,
                        "response": {"name": fn, "content": part["content"]},
                    }
                }
            )
        elif kind == "tool_calls":
            for call in part["tool_calls"]:
                function = call.get("function") or {}
                parts.append(
                    {
                        "functionCall": {
                            "name": function.get("name"),
                            "args": _try_json(function.get("arguments")),
                        }
                    }
                )
                tool_names[str(call.get("id"))] = str(function.get("name"))
        elif kind in ("image_url", "video_url"):
            url = str((part.get(kind) or {}).get("url") or "")
            head, _, data = url.partition(",")
            if kind == "video_url" and not url.startswith("data:"):
                continue
            mime = head.split(";")[0].partition(":")[2] or (
                "video/mp4" if kind == "video_url" else ""
            )
            parts.append({"inlineData": {"mimeType": mime, "data": data}})
    return parts


def _merge_google_parts(previous: list[dict[str, Any]], parts: list[dict[str, Any]]) -> None:
    """A turn of the same role as the one before merged into it: its text appended to the
    first text part with a blank line, its data and function parts added."""
    for part in parts:
        if part.get("text"):
            text_part = next((p for p in previous if isinstance(p.get("text"), str)), None)
            if text_part is not None:
                text_part["text"] += "\n\n" + part["text"]
            else:
                previous.append(part)
        if "inlineData" in part or "functionCall" in part or "functionResponse" in part:
            previous.append(part)


# --- for the adapters --------------------------------------------------------------------------
