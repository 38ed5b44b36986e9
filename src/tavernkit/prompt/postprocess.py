"""Provider post-processing that SillyTavern's server applies to a chat-completion prompt
before sending it (``src/prompt-converters.js``, reference §2.5), as pure functions.

They read and return messages in the OpenAI shape the builders produce (``ChatPrompt.messages``:
``{role, content, name?, tool_calls?, tool_call_id?, ...}``, content a string or text/image
parts). The input is never changed.

- :func:`post_process_prompt` is the "prompt post-processing" setting of OpenAI-compatible
  sources (``merge``, ``semi``, ``strict``, ``single`` and the ``*_tools`` variants);
- :func:`convert_claude_messages` and :func:`convert_google_prompt` are the Anthropic and
  Gemini converters: which system messages become the system prompt, names inlined, user
  first, the assistant prefill;
- :func:`prepare_for_provider` gives the same result in the OpenAI shape, for the provider
  adapters (they lay out the wire format and merge same-role turns themselves).

One deliberate difference: SillyTavern swaps images for random tokens while it merges text and
swaps them back by splitting on blank lines, so a token next to a text that ends or starts with
a newline leaked into the text as garbage (and empty text parts beside images survived). Here
the tokens are private to the call and always come back as images.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tavernkit.errors import FormatError

__all__ = [
    "BLOCKS_KEY",
    "POST_PROCESSING_TYPES",
    "PROMPT_PLACEHOLDER",
    "ClaudePrompt",
    "GooglePrompt",
    "PostProcessing",
    "PromptNames",
    "convert_claude_messages",
    "convert_google_prompt",
    "merge_messages",
    "post_process_prompt",
    "prepare_for_provider",
]

#: The user message SillyTavern adds where a provider needs one and the prompt has none
#: (its ``promptPlaceholder`` config value, default shown).
PROMPT_PLACEHOLDER = "Let's get started."

#: ``custom_prompt_post_processing`` values; ``""`` sends the messages as built, ``claude`` is
#: the old name of ``merge``.
PostProcessing = Literal[
    "", "claude", "merge", "merge_tools", "semi", "semi_tools", "strict", "strict_tools", "single"
]
POST_PROCESSING_TYPES: tuple[str, ...] = (
    "",
    "claude",
    "merge",
    "merge_tools",
    "semi",
    "semi_tools",
    "strict",
    "strict_tools",
    "single",
)

# (strict, placeholders, single, tools) per post-processing type
_MODES: dict[str, tuple[bool, bool, bool, bool]] = {
    "merge": (False, False, False, False),
    "claude": (False, False, False, False),
    "merge_tools": (False, False, False, True),
    "semi": (True, False, False, False),
    "semi_tools": (True, False, False, True),
    "strict": (True, True, False, False),
    "strict_tools": (True, True, False, True),
    "single": (True, False, True, False),
}

Message = dict[str, Any]
#: where :mod:`tavernkit.prompt.convert` keeps the indices of the prompt blocks a message came
#: from while it is post-processed (merging joins them, so a merged message knows its blocks'
#: labels); the conversion to typed messages reads only the message fields, so it is never sent
BLOCKS_KEY = "_blocks"


@dataclass(frozen=True, slots=True)
class PromptNames:
    """The names the converters prefix (SillyTavern's ``char_name``/``user_name``/
    ``group_names`` request fields)."""

    char_name: str = ""
    user_name: str = ""
    group_names: tuple[str, ...] = ()

    def starts_with_group_name(self, text: str) -> bool:
        return any(text.startswith(f"{name}: ") for name in self.group_names)

    def example_prefixed(self, text: str, name: str | None) -> str:
        """``example_user`` / ``example_assistant`` text with the speaker's name in front, once
        (group chats already carry member names)."""
        if name == "example_user" and self.user_name:
            if not text.startswith(f"{self.user_name}: "):
                return f"{self.user_name}: {text}"
        elif (
            name == "example_assistant"
            and self.char_name
            and not text.startswith(f"{self.char_name}: ")
            and not self.starts_with_group_name(text)
        ):
            return f"{self.char_name}: {text}"
        return text

    def char_prefixed(self, text: str) -> str:
        if (
            self.char_name
            and not text.startswith(f"{self.char_name}: ")
            and not self.starts_with_group_name(text)
        ):
            return f"{self.char_name}: {text}"
        return text

    def user_prefixed(self, text: str) -> str:
        if self.user_name and not text.startswith(f"{self.user_name}: "):
            return f"{self.user_name}: {text}"
        return text


# --- merge / semi / strict / single ------------------------------------------------------------


@dataclass(slots=True)
class _Tokens:
    """Stand-ins for non-text parts while texts are joined (private to one call)."""

    parts: dict[str, Mapping[str, Any]] = field(default_factory=dict)

    def add(self, part: Mapping[str, Any]) -> str:
        token = f"\ue000{len(self.parts)}\ue001"
        self.parts[token] = part
        return token

    def restore(self, text: str) -> list[dict[str, Any]] | None:
        """The parts of a merged text: each token back as its part, with the blank line that
        joined it to its neighbours; the text between tokens as text parts."""
        if not self.parts or "\ue000" not in text:
            return None
        out: list[dict[str, Any]] = []
        for k, piece in enumerate(_TOKEN.split(text)):
            if k % 2:
                out.append(copy.deepcopy(dict(self.parts[piece])))
            elif piece:
                out.append({"type": "text", "text": piece})
        return out


_TOKEN = re.compile("(?:\n\n)?(\ue000[0-9]+\ue001)(?:\n\n)?")


def _flatten(content: Any, tokens: _Tokens) -> str:
    if not content:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        texts: list[str] = []
        for part in content:
            if not isinstance(part, Mapping):
                texts.append("")
            elif part.get("type") == "text":
                texts.append(str(part.get("text") or ""))
            elif part.get("type") in ("image_url", "video_url"):
                texts.append(tokens.add(part))
            else:
                texts.append("")
        return "\n\n".join(texts)
    return str(content)


def merge_messages(
    messages: Iterable[Mapping[str, Any]],
    names: PromptNames,
    *,
    strict: bool = False,
    placeholders: bool = False,
    single: bool = False,
    tools: bool = False,
) -> list[Message]:
    """Squash consecutive same-role messages with a blank line, names moved into the text.

    ``strict``: only the first message may be a system message (later ones become user
    messages); with ``placeholders`` a user message is added where the prompt would otherwise
    not start with system-then-user or user. ``single``: every message becomes a user message
    (speaker names in front), so the whole prompt is one user turn. ``tools``: tool calls and
    results are kept as such (otherwise results become user text and calls are dropped).
    """
    tokens = _Tokens()
    prepared: list[Message] = []
    for source in messages:
        message = dict(source)
        role = message.get("role")
        name = message.get("name")
        content = _flatten(message.get("content"), tokens)
        if role == "system":
            content = names.example_prefixed(content, name)
        if name and role != "system" and not content.startswith(f"{name}: "):
            content = f"{name}: {content}"
        if role == "tool" and not tools:
            role = "user"
        if single:
            if role == "assistant":
                content = names.char_prefixed(content)
            if role == "user":
                content = names.user_prefixed(content)
            role = "user"
        message["role"] = role
        message["content"] = content
        message.pop("name", None)
        if not tools:
            message.pop("tool_calls", None)
            message.pop("tool_call_id", None)
        prepared.append(message)

    merged: list[Message] = []
    for message in prepared:
        last = merged[-1] if merged else None
        if (
            last is not None
            and last["role"] == message["role"]
            and message["content"]
            and message["role"] != "tool"
        ):
            last["content"] = f"{last['content']}\n\n{message['content']}"
            if BLOCKS_KEY in message:
                last[BLOCKS_KEY] = [*last.get(BLOCKS_KEY, ()), *message[BLOCKS_KEY]]
        else:
            merged.append(message)

    if not merged:
        merged.append({"role": "user", "content": PROMPT_PLACEHOLDER})

    for message in merged:
        restored = tokens.restore(message["content"])
        if restored is not None:
            message["content"] = restored

    if not strict:
        return merged
    for i, message in enumerate(merged):
        if i > 0 and message["role"] == "system":
            message["role"] = "user"
    if placeholders:
        first = merged[0]["role"]
        if first == "system" and (len(merged) == 1 or merged[1]["role"] != "user"):
            merged.insert(1, {"role": "user", "content": PROMPT_PLACEHOLDER})
        elif first not in ("system", "user"):
            merged.insert(0, {"role": "user", "content": PROMPT_PLACEHOLDER})
    return merge_messages(merged, names, placeholders=placeholders, tools=tools)


def post_process_prompt(
    messages: Iterable[Mapping[str, Any]], processing: str | None, names: PromptNames
) -> list[Message]:
    """Apply one post-processing type (``""``/``None``: the messages unchanged, copied)."""
    mode = _MODES.get(processing or "")
    if mode is None:
        if processing:
            raise FormatError(
                f"unknown prompt post-processing {processing!r}; expected one of "
                + ", ".join(repr(p) for p in POST_PROCESSING_TYPES),
                source="prompt",
                field="custom_prompt_post_processing",
            )
        return [copy.deepcopy(dict(m)) for m in messages]
    strict, placeholders, single, tools = mode
    return merge_messages(
        messages, names, strict=strict, placeholders=placeholders, single=single, tools=tools
    )


# --- Anthropic ---------------------------------------------------------------------------------


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
        leading = 0
        while leading < len(items) and items[leading].get("role") == "system":
            item = items[leading]
            text = names.example_prefixed(str(item.get("content") or ""), item.get("name"))
            system.append({"type": "text", "text": text})
            leading += 1
        items = items[leading:]
        if not items:
            items.append({"role": "user", "content": PROMPT_PLACEHOLDER})

    for index, message in enumerate(items):
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

    if prefill:
        items.append({"role": "assistant", "content": [{"type": "text", "text": prefill.rstrip()}]})

    merged: list[Message] = []
    for message in items:
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1]["content"].extend(message["content"])
        else:
            merged.append(message)

    if not use_tools:
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

    if no_prefill and merged and merged[-1]["role"] == "assistant":
        merged[-1]["role"] = "user"
    return ClaudePrompt(merged, system)


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
        content = message.get("content")
        parts_in: list[dict[str, Any]]
        if isinstance(content, list):
            parts_in = [dict(p) for p in content]
        elif message.get("tool_calls"):
            parts_in = [{"type": "tool_calls", "tool_calls": message["tool_calls"]}]
        elif isinstance(message.get("tool_call_id"), str) and message["tool_call_id"]:
            parts_in = [
                {
                    "type": "tool_call_id",
                    "tool_call_id": message["tool_call_id"],
                    "content": "" if content is None else str(content),
                }
            ]
        else:
            parts_in = [{"type": "text", "text": "" if content is None else str(content)}]

        name = message.get("name")
        if name:
            for part in parts_in:
                if part.get("type") != "text":
                    continue
                text = str(part.get("text") or "")
                if name in ("example_user", "example_assistant"):
                    part["text"] = names.example_prefixed(text, name)
                elif not text.startswith(f"{name}: "):
                    part["text"] = f"{name}: {text}"

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

        if index > 0 and contents and contents[-1]["role"] == role:
            previous = contents[-1]["parts"]
            for part in parts:
                if part.get("text"):
                    text_part = next((p for p in previous if isinstance(p.get("text"), str)), None)
                    if text_part is not None:
                        text_part["text"] += "\n\n" + part["text"]
                    else:
                        previous.append(part)
                if "inlineData" in part or "functionCall" in part or "functionResponse" in part:
                    previous.append(part)
        else:
            contents.append({"role": role, "parts": parts})

    return GooglePrompt(contents, {"parts": [{"text": text} for text in system]})


# --- for the adapters --------------------------------------------------------------------------


def prepare_for_provider(
    messages: Iterable[Mapping[str, Any]],
    source: str,
    names: PromptNames,
    *,
    processing: str | None = None,
    use_system_prompt: bool = False,
    prefill: str = "",
    no_prefill: bool = False,
) -> list[Message]:
    """The messages in the OpenAI shape, post-processed as SillyTavern's server does for
    ``source``, so that an adapter's wire layout gives SillyTavern's request.

    ``claude``: only the leading system messages stay system messages (and only with
    ``use_system_prompt``), the others become user messages with example names; names are
    inlined; ``prefill`` is appended; ``no_prefill`` turns a trailing assistant message into a
    user message. ``makersuite``/``vertexai``: the same system rule (a lone last system message
    stays in the contents). Other sources apply ``processing`` (``merge``, ``strict``...).
    The Anthropic and Gemini adapters then merge same-role turns themselves.
    """
    items = [copy.deepcopy(dict(m)) for m in messages]
    if source == "claude":
        return _prepare_leading_system(
            items, names, use_system_prompt, keep_last=False, prefill=prefill, no_prefill=no_prefill
        )
    if source in ("makersuite", "vertexai", "google", "gemini"):
        return _prepare_leading_system(items, names, use_system_prompt, keep_last=True)
    return post_process_prompt(items, processing, names)


def _prepare_leading_system(
    items: list[Message],
    names: PromptNames,
    use_system_prompt: bool,
    *,
    keep_last: bool,
    prefill: str = "",
    no_prefill: bool = False,
) -> list[Message]:
    leading = 0
    if use_system_prompt:
        limit = len(items) - 1 if keep_last else len(items)
        while leading < limit and items[leading].get("role") == "system":
            item = items[leading]
            content = item.get("content")
            if isinstance(content, str):
                item["content"] = names.example_prefixed(content, item.get("name"))
            item.pop("name", None)
            leading += 1
    out = items[:leading]
    rest = items[leading:]
    if use_system_prompt and not rest and not keep_last:
        rest = [{"role": "user", "content": PROMPT_PLACEHOLDER}]
    for message in rest:
        name = message.pop("name", None)
        content = message.get("content")
        if message.get("role") == "system":
            message["role"] = "user"
            if isinstance(content, str):
                message["content"] = names.example_prefixed(content, name)
            name = None
        if name:
            if isinstance(content, str) or content is None:
                message["content"] = f"{name}: {content or ''}"
            else:
                message["content"] = [
                    {**p, "text": f"{name}: {p.get('text') or ''}"}
                    if p.get("type") == "text"
                    else p
                    for p in content
                ]
        out.append(message)
    if prefill:
        out.append({"role": "assistant", "content": prefill.rstrip()})
    if no_prefill and out and out[-1].get("role") == "assistant" and not out[-1].get("tool_calls"):
        out[-1]["role"] = "user"
    return out
