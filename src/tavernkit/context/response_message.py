"""Reading assistant text and tool calls out of any backend's response shape.

These are the helpers a front end's extensions reach for when they hold a raw response
(``extractMessageFromData``, ``getResponseMessageContent``, ``extractAllFunctionCalls``), kept
for code written against those primitives. New code reads ``TaskResult.assistant_text`` and
``TaskResult.tool_calls`` instead.

Shapes understood (first match wins): a string; an accumulated
:class:`~tavernkit.providers.accumulator.Completion` or a ``TaskResult``; OpenAI chat
(``choices[0].message.content``, string or parts) and text (``choices[0].text``); Anthropic
(``content[]`` text blocks); Gemini (``candidates[0].content.parts[].text``); Cohere
(``message.content[]`` / ``text``); KoboldAI and text-generation-webui (``results[0].text``);
NovelAI (``output``); and ``content`` / ``raw_text`` / ``sse_text`` fallbacks.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from tavernkit.errors import GenerateTaskError
from tavernkit.providers.accumulator import Completion
from tavernkit.tools.calls import ToolCall, coerce_tool_call

__all__ = [
    "completion_to_openai",
    "extract_all_function_calls",
    "extract_message_from_data",
    "get_response_message_content",
]


def _parts_text(parts: Any) -> str | None:
    """Text of a list of content parts/blocks (``{"type": "text", "text": ...}``, Gemini
    ``{"text": ...}`` without ``thought``)."""
    if not isinstance(parts, Sequence) or isinstance(parts, str | bytes):
        return None
    out: list[str] = []
    found = False
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            found = True
        elif isinstance(part, Mapping):
            if part.get("thought") is True or part.get("type") in ("thinking", "reasoning"):
                continue
            text = part.get("text")
            if isinstance(text, str) and part.get("type", "text") in ("text", "output_text"):
                out.append(text)
                found = True
    return "".join(out) if found else None


def _sse_text(text: str) -> str:
    """Assistant text reassembled from raw SSE lines (``data: {...}``) of an OpenAI stream."""
    out: list[str] = []
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if not payload or payload == "[DONE]":
            continue
        try:
            chunk = json.loads(payload)
        except ValueError:
            continue
        choices = chunk.get("choices") if isinstance(chunk, Mapping) else None
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            delta = choices[0].get("delta") or {}
            piece = delta.get("content") if isinstance(delta, Mapping) else None
            if isinstance(piece, str):
                out.append(piece)
    return "".join(out)


def extract_message_from_data(data: Any) -> str:
    """The assistant text of ``data`` (see the module docstring); ``""`` when there is none.
    A string is returned as is."""
    if data is None:
        return ""
    if isinstance(data, str):
        return data
    if isinstance(data, Completion):
        return data.text
    text_attr = getattr(data, "assistant_text", None)
    if isinstance(text_attr, str):
        return text_attr
    if not isinstance(data, Mapping):
        return ""
    choices = data.get("choices")
    if isinstance(choices, Sequence) and choices and isinstance(choices[0], Mapping):
        first = choices[0]
        message = first.get("message")
        if isinstance(message, Mapping):
            content = message.get("content")
            if isinstance(content, str):
                return content
            parts = _parts_text(content)
            if parts is not None:
                return parts
        if isinstance(first.get("text"), str):
            return str(first["text"])
    results = data.get("results")
    if (
        isinstance(results, Sequence)
        and results
        and isinstance(results[0], Mapping)
        and isinstance(results[0].get("text"), str)
    ):
        return str(results[0]["text"])
    candidates = data.get("candidates")
    if isinstance(candidates, Sequence) and candidates and isinstance(candidates[0], Mapping):
        content = candidates[0].get("content")
        if isinstance(content, Mapping):
            parts = _parts_text(content.get("parts"))
            if parts is not None:
                return parts
    content = data.get("content")
    if isinstance(content, str):
        return content
    parts = _parts_text(content)
    if parts is not None:
        return parts
    message = data.get("message")
    if isinstance(message, Mapping):
        parts = _parts_text(message.get("content"))
        if parts is not None:
            return parts
        if isinstance(message.get("content"), str):
            return str(message["content"])
    for key in ("text", "output", "response", "raw_text"):
        if isinstance(data.get(key), str):
            return str(data[key])
    if isinstance(data.get("sse_text"), str):
        return _sse_text(str(data["sse_text"]))
    return ""


def get_response_message_content(response: Any) -> str:
    """The trimmed assistant text of ``response``; an empty one is ``no_response`` (the
    reference raises "Model returned empty text response.")."""
    text = extract_message_from_data(response).strip()
    if not text:
        raise GenerateTaskError("no_response", "Model returned empty text response.")
    return text


def _raw_calls(response: Any) -> list[Any]:
    if isinstance(response, Completion):
        return list(response.tool_calls)
    calls = getattr(response, "tool_calls", None)
    if isinstance(calls, Sequence) and not isinstance(response, Mapping):
        return list(calls)
    if isinstance(response, Mapping):
        choices = response.get("choices")
        if isinstance(choices, Sequence) and choices and isinstance(choices[0], Mapping):
            message = choices[0].get("message")
            if isinstance(message, Mapping) and isinstance(message.get("tool_calls"), list):
                return list(message["tool_calls"])
        if isinstance(response.get("tool_calls"), list):
            return list(response["tool_calls"])
        content = response.get("content")
        if isinstance(content, list):  # Anthropic tool_use blocks
            return [b for b in content if isinstance(b, Mapping) and b.get("type") == "tool_use"]
    return []


def extract_all_function_calls(
    response: Any, allowed_names: Collection[str] | None = None
) -> list[ToolCall]:
    """Every tool call in ``response`` whose name is in ``allowed_names`` (all when ``None``).

    No call at all is ``tool_call_missing``; empty or non-object arguments are
    ``tool_call_parse`` with the raw arguments; calls all filtered out are
    ``tool_call_missing`` ("none matched expected function names").
    """
    raw = _raw_calls(response)
    if not raw:
        raise GenerateTaskError("tool_call_missing", "Model did not return any tool call.")
    out: list[ToolCall] = []
    for index, item in enumerate(raw):
        if isinstance(item, ToolCall):
            call = item
        else:
            name = _call_name(item)
            if not name or (allowed_names is not None and name not in allowed_names):
                continue
            call = coerce_tool_call(item, index)
        if allowed_names is not None and call.name not in allowed_names:
            continue
        out.append(call)
    if not out:
        raise GenerateTaskError(
            "tool_call_missing",
            "Model returned tool calls, but none matched expected function names.",
            details={"allowed": sorted(allowed_names or ())},
        )
    return out


def _call_name(item: Any) -> str:
    if isinstance(item, Mapping):
        fn = item.get("function")
        source = fn if isinstance(fn, Mapping) else item
        name = source.get("name")
    else:
        name = getattr(item, "name", None)
    return name if isinstance(name, str) else ""


def completion_to_openai(completion: Completion) -> dict[str, Any]:
    """An accumulated completion as an OpenAI chat-completion body (what code written for
    ``sendOpenAIRequest`` expects to read)."""
    message: dict[str, Any] = {"role": "assistant", "content": completion.text}
    if completion.reasoning:
        message["reasoning_content"] = completion.reasoning
    if completion.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in completion.tool_calls
        ]
    body: dict[str, Any] = {
        "id": completion.response_id,
        "object": "chat.completion",
        "model": completion.model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": completion.finish_reason or "stop"}
        ],
    }
    usage = completion.usage
    if usage is not None:
        body["usage"] = {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
        }
    return body
