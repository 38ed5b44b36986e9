"""Chat messages of a chat-completion prompt: conversion, in-chat injection, history, examples.

``chat_messages`` is ``setOpenAIMessages`` (newest first, names behaviour applied);
``inject_prompts`` is ``populationInjectionPrompts`` (SillyTavern 1.18 §2.4); ``fill_history``
and ``fill_examples`` spend what is left of the budget, newest message first, and stop at the
first one that does not fit. The chat is converted lazily (:class:`ChatHistory`): a long chat
is mostly cut by the budget, so a build's cost follows the messages that fit, not the chat's
length.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from tavernkit.jscompat import js_trim
from tavernkit.models.chat import ImagePart, Message, TextPart
from tavernkit.prompt._completion import Msg, MsgCollection, PromptSlots
from tavernkit.prompt.collection import Prompt, PromptCollection
from tavernkit.prompt.examples import ExampleMessage
from tavernkit.prompt.extensions import ROLE_NAMES
from tavernkit.prompt.state import ExtensionPosition, ExtensionPrompt, Substitute

__all__ = [
    "MAX_INJECTION_DEPTH",
    "ChatHistory",
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
    """A chat message on its way into the prompt (``openai_msgs`` item). Those of the chat
    are made on demand by :class:`ChatHistory`."""

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


@dataclass(frozen=True, slots=True)
class _Converter:
    user: str
    names_behavior: int
    in_group: bool
    texts: Mapping[int, str] | None
    carry_reasoning: Callable[[Message], bool] | None
    #: the prompt text of a message (regex scripts applied), by chat index; ``None``: as stored
    rewrite: Callable[[int, Message], str] | None = None

    def make(self, index: int, message: Message) -> OpenAIMessage:
        """``setOpenAIMessages`` for one message: role, text (names behaviour, no ``\\r``),
        images, tool invocations, and reasoning when it may be carried."""
        extra = message.extra
        narrator = extra.type == "narrator"
        role = "system" if narrator else ("user" if message.is_user else "assistant")
        mes = message.mes
        texts = self.texts
        if texts and index in texts:
            content = texts[index]
        elif self.rewrite is not None:
            content = self.rewrite(index, message)
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
        images: tuple[ImagePart, ...] = ()
        if not isinstance(mes, str) or extra.media or extra.image:
            images = tuple(p for p in message.parts() if isinstance(p, ImagePart))
        invocations: tuple[Mapping[str, Any], ...] = ()
        if extra.tool_invocations:
            invocations = tuple(inv.to_wire() for inv in extra.tool_invocations if inv is not None)
        reasoning = signature = None
        if self.carry_reasoning is not None and self.carry_reasoning(message):
            reasoning = message.current_reasoning or None
            signature = extra.reasoning_signature
        return OpenAIMessage(
            role, content, message.name, images, invocations, reasoning, signature, index
        )


#: Messages :class:`ChatHistory` converts ahead of an iteration.
_AHEAD = 8


class ChatHistory(Sequence[OpenAIMessage]):
    """The chat messages of a build, **newest first**, each made on first access.

    A long chat is mostly cut by the budget: the history walk stops at the first message that
    does not fit, so only the messages it reaches (and the few in-chat injections splice past)
    are ever converted. ``head`` holds what has been made so far (injections included);
    ``_next`` is the chat position of the next message to make, counting down.
    """

    __slots__ = ("_chat", "_converter", "_head", "_next")

    def __init__(
        self,
        chat: Sequence[tuple[int, Message]] = (),
        converter: _Converter | None = None,
        *,
        head: Sequence[OpenAIMessage] = (),
    ) -> None:
        self._chat = chat
        self._converter = converter
        self._head: list[OpenAIMessage] = list(head)
        # Without a converter there is nothing to make the chat's messages with.
        self._next = len(chat) - 1 if converter is not None else -1

    def _make(self, upto: int) -> None:
        """Convert chat messages until ``head`` holds ``upto`` items (or the chat is done)."""
        head, chat, position = self._head, self._chat, self._next
        if position < 0 or self._converter is None:
            return
        make = self._converter.make
        while len(head) < upto and position >= 0:
            head.append(make(*chat[position]))
            position -= 1
        self._next = position

    def __len__(self) -> int:
        return len(self._head) + self._next + 1

    @overload
    def __getitem__(self, index: int) -> OpenAIMessage: ...

    @overload
    def __getitem__(self, index: slice) -> list[OpenAIMessage]: ...

    def __getitem__(self, index: int | slice) -> OpenAIMessage | list[OpenAIMessage]:
        if isinstance(index, slice):
            self._make(len(self))
            return self._head[index]
        if index < 0:
            index += len(self)
        if index >= len(self._head):
            self._make(index + 1)
        return self._head[index]

    def __iter__(self) -> Iterator[OpenAIMessage]:
        head = self._head
        position = 0
        while True:
            if position >= len(head):
                # A few ahead at a time: converting is pure, and a call per message is not.
                self._make(position + _AHEAD)
                if position >= len(head):
                    return
            yield head[position]
            position += 1

    def splice(self, at: int, items: Sequence[OpenAIMessage]) -> None:
        """Insert ``items`` before the ``at``-th newest message (``list[at:at] = items``)."""
        self._make(at)
        self._head[at:at] = items

    def pop_newest(self) -> OpenAIMessage:
        self._make(1)
        return self._head.pop(0)


def chat_messages(
    chat: Sequence[tuple[int, Message]],
    *,
    user: str,
    names_behavior: int,
    in_group: bool = False,
    texts: Mapping[int, str] | None = None,
    carry_reasoning: Callable[[Message], bool] | None = None,
    rewrite: Callable[[int, Message], str] | None = None,
) -> ChatHistory:
    """``setOpenAIMessages``: newest first; ``chat`` pairs each message with its chat index,
    ``texts`` replaces the text of some (reasoning added back) and ``rewrite`` gives the
    others' (regex scripts applied). Made lazily."""
    converter = _Converter(user, names_behavior, in_group, texts, carry_reasoning, rewrite)
    return ChatHistory(chat, converter)


def inject_prompts(
    absolute: Sequence[Prompt],
    messages: ChatHistory,
    extension_prompts: Mapping[str, ExtensionPrompt],
    substitute: Substitute,
) -> ChatHistory:
    """Insert the in-chat prompts into ``messages`` (newest first, changed in place and
    returned).

    Per depth: group by ``injection_order`` (descending; the default group 100 always exists
    and also takes the extension prompts of that depth), and within a group one message per role
    in the order system, user, assistant. Each depth's messages are spliced at
    ``depth + inserted so far``.
    """
    # ``getExtensionPrompt`` reads the prompts by sorted key; sort and filter them once rather
    # than for every depth and role.
    in_chat = [
        ext
        for key in sorted(extension_prompts)
        if (ext := extension_prompts[key]).position == ExtensionPosition.IN_CHAT and ext.value
    ]
    by_depth: dict[int, list[Prompt]] = {}
    for prompt in absolute:
        if prompt.injection_depth is not None and prompt.content:
            by_depth.setdefault(prompt.injection_depth, []).append(prompt)
    depths: set[int] = {p.injection_depth for p in absolute if p.injection_depth is not None}
    if any(ext.depth is None for ext in in_chat):
        depths.update(range(MAX_INJECTION_DEPTH + 1))
    else:
        depths.update(ext.depth for ext in in_chat if ext.depth is not None)
    inserted = 0
    for depth in sorted(d for d in depths if 0 <= d <= MAX_INJECTION_DEPTH):
        groups: dict[int, list[Prompt]] = {100: []}
        for prompt in by_depth.get(depth, ()):
            order = prompt.injection_order if prompt.injection_order is not None else 100
            groups.setdefault(order, []).append(prompt)
        at_depth = [ext for ext in in_chat if ext.depth is None or ext.depth == depth]
        role_messages: list[OpenAIMessage] = []
        for order in sorted(groups, reverse=True):
            for role_index, role in enumerate(ROLE_NAMES):
                joined = "\n".join(p.content for p in groups[order] if p.role == role)
                extension = ""
                if order == 100 and at_depth:
                    extension = "\n".join(
                        js_trim(ext.value)
                        for ext in at_depth
                        if ext.role is None or ext.role == role_index
                    )
                    if extension:
                        extension = substitute(extension)
                content = "\n".join(js_trim(x) for x in (joined, extension) if x)
                if content:
                    role_messages.append(OpenAIMessage(role=role, content=content, injected=True))
        if role_messages:
            messages.splice(depth + inserted, role_messages)
            inserted += len(role_messages)
    return messages


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
    #: A group turn's nudge (``[Write the next reply only as ...]``): the last history message.
    group_nudge: Msg | None = None


def _continue_nudge(
    messages: Sequence[OpenAIMessage],
    substitute: Substitute,
    make: Callable[..., Msg],
    options: HistoryOptions,
) -> tuple[MsgCollection, OpenAIMessage | None]:
    """The continue nudge's collection: the newest chat message (not an injection), moved
    out of the history, then the nudge; and the message it moved."""
    assert options.continue_nudge is not None
    total = len(messages)
    collection = MsgCollection("continueNudge")
    skip: OpenAIMessage | None = None
    for position, candidate in enumerate(messages):
        if not candidate.injected:
            skip = candidate
            collection.items.append(
                _history_msg(
                    candidate, f"chatHistory-{total - position}", substitute, make, options
                )
            )
            break
    collection.items.append(options.continue_nudge)
    return collection, skip


def _tool_round(
    chat_message: OpenAIMessage, identifier: str, make: Callable[..., Msg]
) -> list[Msg]:
    """A message's tool calls and their results as the history sends them, in the order they
    are put in front of the history (the results newest first, then the call)."""
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
    return [*reversed(results), call]


def fill_history(
    completion: PromptSlots,
    prompts: PromptCollection,
    messages: Sequence[OpenAIMessage],
    substitute: Substitute,
    make: Callable[..., Msg],
    options: HistoryOptions,
) -> None:
    """``populateChatHistory`` over ``messages`` (**newest first**): each message goes in at
    the start of the history until the first that does not fit, so later (older) messages are
    never looked at."""
    if not prompts.has("chatHistory"):
        return
    history = MsgCollection("chatHistory")
    completion.add(history, prompts.index("chatHistory"))
    completion.reserve(options.new_chat.tokens)
    if options.group_nudge is not None:
        completion.reserve(options.group_nudge.tokens)

    total = len(messages)
    continue_collection: MsgCollection | None = None
    skip: OpenAIMessage | None = None
    if options.continue_nudge is not None:
        continue_collection, skip = _continue_nudge(messages, substitute, make, options)
        completion.reserve(continue_collection.tokens)

    newest = messages[0] if total else None
    if newest is not None and newest.role == "assistant" and options.send_if_empty is not None:
        empty = options.send_if_empty
        if completion.can_afford(empty.tokens):
            completion.insert(empty, "chatHistory")

    # Collected newest first and put in front of the history once at the end: the same order
    # as inserting each at the start, without shifting the list on every message.
    taken: list[Msg] = []
    tools = options.tools
    number = total + 1
    for chat_message in messages:
        number -= 1
        if chat_message is skip:
            continue
        identifier = f"chatHistory-{number}"
        # Evaluated even when the tool-call form is sent: its macros may have side effects.
        msg = _history_msg(chat_message, identifier, substitute, make, options)
        if tools and chat_message.invocations:
            parts = _tool_round(chat_message, identifier, make)
            if not completion.can_afford(sum(part.tokens for part in parts)):
                break
            for part in parts:
                if part.has_payload():
                    completion.reserve(part.tokens)
                    taken.append(part)
            continue
        if completion.budget < msg.tokens:
            break
        if msg.content or msg.tool_calls:
            completion.budget -= msg.tokens
            taken.append(msg)
    taken.reverse()
    history.items[0:0] = taken

    completion.free(options.new_chat.tokens)
    completion.insert_at_start(options.new_chat, "chatHistory")
    if options.group_nudge is not None:
        completion.free(options.group_nudge.tokens)
        completion.insert(options.group_nudge, "chatHistory")

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
    if options.inline_images and chat_message.images:
        parts: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
        parts.extend(_image_part(p) for p in chat_message.images)
        content = parts
    name = None
    if options.names_behavior == NamesBehavior.COMPLETION and chat_message.name:
        name = sanitize_name(chat_message.name)
    return make(
        chat_message.role,
        content,
        identifier,
        "injection" if chat_message.injected else "history",
        name,
        None,
        None,
        chat_message.message_index,
        chat_message.reasoning,
        chat_message.signature,
        chat_message.entries,
    )


def _image_part(part: ImagePart) -> dict[str, Any]:
    url: dict[str, Any] = {"url": part.data_url if part.data else part.url}
    if part.detail:
        url["detail"] = part.detail
    return {"type": "image_url", "image_url": url}


def fill_examples(
    completion: PromptSlots,
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
