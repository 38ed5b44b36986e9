"""Chat messages of a chat-completion prompt: conversion, in-chat injection, history, examples.

``chat_messages`` is ``setOpenAIMessages`` (newest first, names behaviour applied);
``inject_prompts`` is ``populationInjectionPrompts`` (SillyTavern 1.18 §2.4); ``fill_history``
and ``fill_examples`` spend what is left of the budget, newest message first, and stop at the
first one that does not fit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tavernkit.models.chat import ImagePart, Message, TextPart
from tavernkit.prompt._completion import Completion, Msg, MsgCollection
from tavernkit.prompt._js import js_trim
from tavernkit.prompt.collection import Prompt, PromptCollection
from tavernkit.prompt.examples import ExampleMessage
from tavernkit.prompt.extensions import ROLE_NAMES, extension_prompt_text
from tavernkit.prompt.state import ExtensionPosition, ExtensionPrompt, Substitute

__all__ = [
    "MAX_INJECTION_DEPTH",
    "NamesBehavior",
    "OpenAIMessage",
    "chat_messages",
    "fill_examples",
    "fill_history",
    "inject_prompts",
    "sanitize_name",
]

MAX_INJECTION_DEPTH = 10000


class NamesBehavior:
    """``character_names_behavior``."""

    NONE = -1
    DEFAULT = 0
    COMPLETION = 1
    CONTENT = 2


_VALID_NAME = re.compile(r"^[a-zA-Z0-9_]{1,64}$")
_INVALID_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_]")


def sanitize_name(name: str) -> str:
    """An OpenAI ``name`` field: kept when valid, else non-word characters become ``_``."""
    if _VALID_NAME.match(name):
        return name
    return _INVALID_NAME_CHARS.sub("_", name)[:64]


@dataclass(slots=True)
class OpenAIMessage:
    """A chat message on its way into the prompt (``openai_msgs`` item).

    Messages converted from the chat are resolved lazily (``resolved()``): a long chat is
    mostly cut by the budget, and only the messages the history walk reaches need their text.
    """

    role: str
    content: str = ""
    name: str = ""
    images: tuple[ImagePart, ...] = ()
    invocations: tuple[Mapping[str, Any], ...] = ()
    reasoning: str | None = None
    signature: str | None = None
    message_index: int | None = None
    injected: bool = False
    entries: tuple[str, ...] = field(default=())
    source: Message | None = None
    resolver: _Resolver | None = None

    def resolved(self) -> OpenAIMessage:
        if self.resolver is not None and self.source is not None:
            self.resolver.fill(self, self.source)
            self.resolver = None
        return self


@dataclass(frozen=True, slots=True)
class _Resolver:
    user: str
    names_behavior: int
    in_group: bool
    texts: Mapping[int, str] | None
    carry_reasoning: Callable[[Message], bool] | None

    def fill(self, out: OpenAIMessage, message: Message) -> None:
        """``setOpenAIMessages`` for one message: text (names behaviour, no ``\\r``),
        images, tool invocations, and reasoning when it may be carried."""
        extra = message.extra
        narrator = out.role == "system"
        mes = message.mes
        index = out.message_index
        if self.texts and index is not None and index in self.texts:
            content = self.texts[index]
        else:
            content = mes if isinstance(mes, str) else message.text
        if self.names_behavior == NamesBehavior.DEFAULT:
            if (self.in_group and message.name != self.user) or (
                message.force_avatar and message.name != self.user and not narrator
            ):
                content = f"{message.name}: {content}"
        elif self.names_behavior == NamesBehavior.CONTENT and not narrator:
            content = f"{message.name}: {content}"
        if "\r" in content:
            content = content.replace("\r", "")
        out.content = content
        if not isinstance(mes, str) or extra.media or extra.image:
            out.images = tuple(p for p in message.parts() if isinstance(p, ImagePart))
        tool_invocations = extra.tool_invocations
        if tool_invocations:
            out.invocations = tuple(inv.to_wire() for inv in tool_invocations if inv is not None)
        if self.carry_reasoning is not None and self.carry_reasoning(message):
            out.reasoning = message.current_reasoning or None
            out.signature = extra.reasoning_signature


def chat_messages(
    chat: Sequence[tuple[int, Message]],
    *,
    user: str,
    names_behavior: int,
    in_group: bool = False,
    texts: Mapping[int, str] | None = None,
    carry_reasoning: Callable[[Message], bool] | None = None,
) -> list[OpenAIMessage]:
    """``setOpenAIMessages``: newest first; ``chat`` pairs each message with its chat index and
    ``texts`` replaces the text of some (reasoning added back). Resolved lazily."""
    resolver = _Resolver(user, names_behavior, in_group, texts, carry_reasoning)
    out: list[OpenAIMessage] = []
    append = out.append
    make = OpenAIMessage
    for index, message in reversed(chat):
        role = (
            "system"
            if message.extra.type == "narrator"
            else ("user" if message.is_user else "assistant")
        )
        append(
            make(role, "", message.name, (), (), None, None, index, False, (), message, resolver)
        )
    return out


def inject_prompts(
    absolute: Sequence[Prompt],
    messages: list[OpenAIMessage],
    extension_prompts: Mapping[str, ExtensionPrompt],
    substitute: Substitute,
) -> list[OpenAIMessage]:
    """Insert the in-chat prompts into ``messages`` (newest first); return them oldest first.

    Per depth: group by ``injection_order`` (descending; the default group 100 always exists
    and also takes the extension prompts of that depth), and within a group one message per role
    in the order system, user, assistant. Each depth's messages are spliced at
    ``depth + inserted so far``.
    """
    in_chat = [
        ext for ext in extension_prompts.values() if ext.position == ExtensionPosition.IN_CHAT
    ]
    depths: set[int] = {p.injection_depth for p in absolute if p.injection_depth is not None}
    if any(ext.depth is None for ext in in_chat if ext.value):
        depths.update(range(MAX_INJECTION_DEPTH + 1))
    else:
        depths.update(ext.depth for ext in in_chat if ext.value and ext.depth is not None)
    out = list(messages)
    inserted = 0
    for depth in sorted(d for d in depths if 0 <= d <= MAX_INJECTION_DEPTH):
        at_depth = [p for p in absolute if p.injection_depth == depth and p.content]
        groups: dict[int, list[Prompt]] = {100: []}
        for prompt in at_depth:
            order = prompt.injection_order if prompt.injection_order is not None else 100
            groups.setdefault(order, []).append(prompt)
        role_messages: list[OpenAIMessage] = []
        for order in sorted(groups, reverse=True):
            for role_index, role in enumerate(ROLE_NAMES):
                texts = [p.content for p in groups[order] if p.role == role]
                joined = "\n".join(texts)
                extension = (
                    extension_prompt_text(
                        extension_prompts,
                        substitute,
                        position=ExtensionPosition.IN_CHAT,
                        depth=depth,
                        role=role_index,
                        wrap=False,
                    )
                    if order == 100
                    else ""
                )
                content = "\n".join(js_trim(x) for x in (joined, extension) if x)
                if content:
                    role_messages.append(OpenAIMessage(role=role, content=content, injected=True))
        if role_messages:
            at = depth + inserted
            out[at:at] = role_messages
            inserted += len(role_messages)
    out.reverse()
    return out


# --- history ---------------------------------------------------------------------------------


def _tool_calls(invocations: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    calls = []
    for inv in invocations:
        params = inv.get("parameters")
        arguments = params if isinstance(params, str) else json.dumps(params or {})
        calls.append(
            {
                "id": inv.get("id"),
                "type": "function",
                "function": {"arguments": arguments, "name": inv.get("name")},
            }
        )
    return calls


@dataclass(slots=True)
class HistoryOptions:
    names_behavior: int
    inline_images: bool
    tools: bool
    continue_nudge: Msg | None
    new_chat: Msg
    send_if_empty: Msg | None


def fill_history(
    completion: Completion,
    prompts: PromptCollection,
    messages: Sequence[OpenAIMessage],
    substitute: Substitute,
    make: Callable[..., Msg],
    options: HistoryOptions,
) -> None:
    """``populateChatHistory``."""
    if not prompts.has("chatHistory"):
        return
    completion.add(MsgCollection("chatHistory"), prompts.index("chatHistory"))
    completion.reserve(options.new_chat.tokens)

    total = len(messages)
    continue_collection: MsgCollection | None = None
    skip: OpenAIMessage | None = None
    if options.continue_nudge is not None:
        continue_collection = MsgCollection("continueNudge")
        for position, candidate in enumerate(reversed(messages)):
            if not candidate.injected:
                skip = candidate.resolved()
                continue_collection.items.append(
                    _history_msg(
                        candidate, f"chatHistory-{total - position}", substitute, make, options
                    )
                )
                break
        continue_collection.items.append(options.continue_nudge)
        completion.reserve(continue_collection.tokens)

    last = messages[-1] if messages else None
    if last is not None and last.role == "assistant" and options.send_if_empty is not None:
        empty = options.send_if_empty
        if completion.can_afford(empty.tokens):
            completion.insert(empty, "chatHistory")

    for position, chat_message in enumerate(reversed(messages)):
        if chat_message is skip:
            continue
        identifier = f"chatHistory-{total - position}"
        chat_message.resolved()
        msg = _history_msg(chat_message, identifier, substitute, make, options)
        if options.tools and chat_message.invocations:
            call = make(
                chat_message.role,
                # Task messages (no chat index) keep text sent beside their tool calls.
                (chat_message.content or None) if chat_message.message_index is None else None,
                f"toolCall-{identifier}",
                source="tool",
                tool_calls=_tool_calls(chat_message.invocations),
                message_index=chat_message.message_index,
            )
            results = [
                make(
                    "tool",
                    str(inv.get("result") or "[No content]"),
                    str(inv.get("id")),
                    source="tool",
                    tool_call_id=str(inv.get("id")),
                    message_index=chat_message.message_index,
                )
                for inv in chat_message.invocations
            ]
            if not completion.can_afford(call.tokens + sum(r.tokens for r in results)):
                break
            for result in reversed(results):
                completion.insert_at_start(result, "chatHistory")
            completion.insert_at_start(call, "chatHistory")
            continue
        if not completion.can_afford(msg.tokens):
            break
        completion.insert_at_start(msg, "chatHistory")

    completion.free(options.new_chat.tokens)
    completion.insert_at_start(options.new_chat, "chatHistory")

    if continue_collection is not None:
        completion.free(continue_collection.tokens)
        completion.add(continue_collection, -1)


def _history_msg(
    chat_message: OpenAIMessage,
    identifier: str,
    substitute: Substitute,
    make: Callable[..., Msg],
    options: HistoryOptions,
) -> Msg:
    content: Any = substitute(chat_message.content)
    images = chat_message.images if options.inline_images else ()
    if images:
        parts: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
        parts.extend(_image_part(p) for p in images)
        content = parts
    name = None
    if options.names_behavior == NamesBehavior.COMPLETION and chat_message.name:
        name = sanitize_name(chat_message.name)
    return make(
        chat_message.role,
        content,
        identifier,
        source="injection" if chat_message.injected else "history",
        name=name,
        message_index=chat_message.message_index,
        reasoning=chat_message.reasoning,
        signature=chat_message.signature,
        entries=chat_message.entries,
    )


def _image_part(part: ImagePart) -> dict[str, Any]:
    url: dict[str, Any] = {"url": part.data_url if part.data else part.url}
    if part.detail:
        url["detail"] = part.detail
    return {"type": "image_url", "image_url": url}


def fill_examples(
    completion: Completion,
    prompts: PromptCollection,
    blocks: Sequence[Sequence[ExampleMessage]],
    header: Msg,
    make: Callable[..., Msg],
) -> None:
    """``populateDialogueExamples``: each block with its header, whole or not at all."""
    if not prompts.has("dialogueExamples"):
        return
    completion.add(MsgCollection("dialogueExamples"), prompts.index("dialogueExamples"))
    for block_index, block in enumerate(blocks):
        msgs = [
            make(
                "system",
                example.content or "",
                f"dialogueExamples {block_index}-{i}",
                source="example",
                name=example.name,
            )
            for i, example in enumerate(block)
        ]
        if not completion.can_afford(header.tokens + sum(m.tokens for m in msgs)):
            break
        completion.insert(header, "dialogueExamples")
        for msg in msgs:
            completion.insert(msg, "dialogueExamples")


def text_parts(content: Any) -> str:
    """The text of a message content (string or parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(
            p.text if isinstance(p, TextPart) else str(p.get("text", ""))
            for p in content
            if isinstance(p, TextPart) or (isinstance(p, dict) and p.get("type") == "text")
        )
    return ""
