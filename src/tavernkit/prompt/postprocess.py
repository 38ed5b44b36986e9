"""Provider post-processing that SillyTavern's server applies to a chat-completion prompt
before sending it (``src/prompt-converters.js``, reference §2.5), as pure functions.

They read and return messages in the OpenAI shape the builders produce (``ChatPrompt.messages``:
``{role, content, name?, tool_calls?, tool_call_id?, ...}``, content a string or text/image
parts). The input is never changed.

- :func:`post_process_prompt` is the "prompt post-processing" setting of OpenAI-compatible
  sources (``merge``, ``semi``, ``strict``, ``single`` and the ``*_tools`` variants);
- the Anthropic and Gemini converters themselves (which system messages become the system
  prompt, names inlined, user first, the assistant prefill) are
  :mod:`tavernkit.prompt.vendor_converters`;
- :func:`prepare_for_provider` gives the same result in the OpenAI shape, for the provider
  adapters (they lay out the wire format and merge same-role turns themselves).

One deliberate difference: SillyTavern swaps images for random tokens while it merges text and
swaps them back by splitting on blank lines, so a token next to a text that ends or starts with
a newline leaked into the text as garbage (and empty text parts beside images survived). Here
the tokens are private to the call and always come back as images.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tavernkit.errors import FormatError

__all__ = [
    "BLOCKS_KEY",
    "POST_PROCESSING_TYPES",
    "PROMPT_PLACEHOLDER",
    "PostProcessing",
    "PromptNames",
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
