"""From what the prompt builders return to what the provider adapters read.

The builders give a :class:`tavernkit.prompt.assembled.AssembledChat` (blocks with provenance, each
message a plain OpenAI-shape dict) or a :class:`~tavernkit.prompt.assembled.AssembledText`; the
adapters take :mod:`tavernkit.providers.request` values (typed messages plus samplers, tools and
output format). :func:`to_provider_request` is the one crossing point, so the turn runner never
hand-builds provider messages: names, tool calls and results, reasoning with its signature and
image parts all survive, and block flags decide what a model without tools receives.

Every message carries its block's :class:`~tavernkit.providers.request.MessageLabel` (source,
identifier, tool-only flag, entries, tokens), so the labels survive from the builder to each
attempt: :class:`~tavernkit.generation.attempt.chat_prompt.TurnPrompt` trims only history,
drops tool-only
messages for a model without tools, and the prompt inspector reads the same labelled request
the turn sends. Post-processing that merges messages merges their labels
(:func:`merged_label`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from tavernkit.errors import FormatError
from tavernkit.prompt import assembled
from tavernkit.prompt.postprocess import BLOCKS_KEY, PromptNames, prepare_for_provider
from tavernkit.providers.accumulator import ReasoningBlock, WireToolCall
from tavernkit.providers.request import (
    ChatMessage,
    ChatPrompt,
    ContentPart,
    MessageLabel,
    ResponseFormat,
    Role,
    Sampling,
    TextPrompt,
    ToolChoice,
    ToolSpec,
    WireImagePart,
    WireTextPart,
)

__all__ = [
    "ChatShaping",
    "RequestExtras",
    "block_label",
    "merged_label",
    "message_from_dict",
    "to_provider_request",
]

_ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")


def block_label(block: assembled.PromptBlock) -> MessageLabel:
    return MessageLabel(
        kind=block.source,
        identifier=block.identifier,
        message_index=block.message_index,
        tool_only=block.requires_tool_calling,
        entries=block.entries,
        tokens=block.tokens,
    )


def merged_label(labels: Sequence[MessageLabel]) -> MessageLabel:
    """One label for messages post-processing merged into one. The result is history only
    when every part is (a chat message squashed with an injection must stay), tool-only only
    when every part is; otherwise it takes the first part's kind that is not history."""
    if len(labels) == 1:
        return labels[0]
    kinds = [label.kind for label in labels]
    fixed = [k for k in kinds if k not in ("history", "tool")]
    kind = fixed[0] if fixed else ("history" if "history" in kinds else "tool")
    return MessageLabel(
        kind=kind,
        identifier="+".join(label.identifier for label in labels),
        message_index=next((x.message_index for x in labels if x.message_index is not None), None),
        tool_only=all(label.tool_only for label in labels),
        entries=tuple(dict.fromkeys(e for label in labels for e in label.entries)),
        tokens=sum(label.tokens for label in labels),
    )


@dataclass(frozen=True, slots=True)
class RequestExtras:
    """What a request carries besides its messages, sampling and stop strings: the tools
    offered and the choice among them, a structured-output format, the reasoning settings,
    and a text model's grammar."""

    tools: Sequence[ToolSpec] = ()
    tool_choice: ToolChoice | None = None
    response_format: ResponseFormat | None = None
    reasoning_effort: str | None = None
    reasoning_budget: int | None = None
    grammar: str | None = None


@dataclass(frozen=True, slots=True)
class ChatShaping:
    """How a chat prompt's blocks become the provider's messages.

    - ``tool_calling``: whether the model can take tool calls; ``False`` drops the blocks
      flagged ``requires_tool_calling`` (tool calls and results of earlier turns), so an
      attempt on a model without tools needs no rebuild. ``None`` (unknown) keeps them;
    - ``cache_prefix`` marks the last block before the chat history as the end of the stable
      prefix (Anthropic prompt caching);
    - ``source`` / ``processing`` / ``names`` / ``use_system_prompt`` / ``prefill`` /
      ``no_prefill`` apply SillyTavern's server-side post-processing
      (:func:`~tavernkit.prompt.postprocess.prepare_for_provider`) before conversion; with
      neither ``source`` nor ``processing`` the messages go as built.
    """

    source: str | None = None
    processing: str | None = None
    names: PromptNames | None = None
    use_system_prompt: bool = False
    prefill: str = ""
    no_prefill: bool = False
    tool_calling: bool | None = None
    cache_prefix: bool = False

    @property
    def post_processes(self) -> bool:
        return bool(self.source and self.source != "openai") or bool(self.processing)


_NO_EXTRAS = RequestExtras()
_AS_BUILT = ChatShaping()


@overload
def to_provider_request(
    prompt: assembled.AssembledChat,
    *,
    sampling: Sampling | None = ...,
    stop: Sequence[str] | None = ...,
    extras: RequestExtras = ...,
    shaping: ChatShaping = ...,
) -> ChatPrompt: ...


@overload
def to_provider_request(
    prompt: assembled.AssembledText,
    *,
    sampling: Sampling | None = ...,
    stop: Sequence[str] | None = ...,
    extras: RequestExtras = ...,
    shaping: ChatShaping = ...,
) -> TextPrompt: ...


def to_provider_request(
    prompt: assembled.AssembledChat | assembled.AssembledText,
    *,
    sampling: Sampling | None = None,
    stop: Sequence[str] | None = None,
    extras: RequestExtras = _NO_EXTRAS,
    shaping: ChatShaping = _AS_BUILT,
) -> ChatPrompt | TextPrompt:
    """The provider-side request for a built prompt.

    Text prompts keep their prompt string and stop strings (``stop`` replaces them); chat
    prompts are shaped for the provider as ``shaping`` says (:class:`ChatShaping`).
    """
    if isinstance(prompt, assembled.AssembledText):
        return TextPrompt(
            prompt.prompt,
            sampling=sampling or Sampling(),
            stop=tuple(prompt.stop if stop is None else stop),
            response_format=extras.response_format,
            grammar=extras.grammar,
            pieces=prompt.pieces,
        )
    return ChatPrompt(
        _shaped_messages(prompt, shaping),
        sampling=sampling or Sampling(),
        stop=tuple(stop or ()),
        tools=tuple(extras.tools),
        tool_choice=extras.tool_choice,
        response_format=extras.response_format,
        reasoning_effort=extras.reasoning_effort,
        reasoning_budget=extras.reasoning_budget,
    )


def _shaped_messages(
    prompt: assembled.AssembledChat, shaping: ChatShaping
) -> tuple[ChatMessage, ...]:
    """The chat's blocks as typed, labelled messages, post-processed for the provider."""
    chat = prompt if shaping.tool_calling is not False else prompt.without_tool_blocks()
    blocks = chat.blocks
    cache_at = _cache_index(blocks) if shaping.cache_prefix else -1
    labels = [block_label(b) for b in blocks]
    raw = [dict(b.message) for b in blocks]
    post = shaping.post_processes
    if post:
        for i, message in enumerate(raw):
            message[BLOCKS_KEY] = [i]
        raw = prepare_for_provider(
            raw,
            shaping.source or "",
            shaping.names or PromptNames(),
            processing=shaping.processing,
            use_system_prompt=shaping.use_system_prompt,
            prefill=shaping.prefill,
            no_prefill=shaping.no_prefill,
        )
        # Post-processing merges and inserts messages, so a block index no longer points at
        # the same message; the cache mark then goes on the last system message, if any.
        if cache_at >= 0:
            cache_at = max((i for i, m in enumerate(raw) if m.get("role") == "system"), default=-1)
    return tuple(
        message_from_dict(
            m, cache=i == cache_at, where=f"messages[{i}]", label=_label_of(m, i, labels, post)
        )
        for i, m in enumerate(raw)
    )


def _label_of(
    message: Mapping[str, Any], index: int, labels: Sequence[MessageLabel], post: bool
) -> MessageLabel:
    if not post:
        return labels[index]
    parts = message.get(BLOCKS_KEY)
    if not parts:
        # a message post-processing added (a placeholder user turn, Claude's prefill)
        return MessageLabel(kind="control", identifier="postProcessing")
    return merged_label([labels[i] for i in parts])


def _cache_index(blocks: Sequence[assembled.PromptBlock]) -> int:
    """The last block before the first history/injection/tool block: what stays the same from
    one turn to the next."""
    last = -1
    for i, block in enumerate(blocks):
        if block.source in ("history", "injection", "tool"):
            break
        last = i
    return last


def message_from_dict(
    message: Mapping[str, Any],
    *,
    cache: bool = False,
    where: str = "message",
    label: MessageLabel | None = None,
) -> ChatMessage:
    """One OpenAI-shape message (as ``ChatPrompt.messages`` holds them) as a typed message.

    ``reasoning`` + ``signature`` become one reasoning block (sent back to providers that
    verify it); ``reasoning_blocks`` may also carry several prepared blocks.
    """
    role = message.get("role")
    if role not in _ROLES:
        raise FormatError(f"unknown message role {role!r}", source="prompt", field=f"{where}.role")
    content = message.get("content")
    if content.__class__ is not str:  # plain text, the common case, needs no checking
        content = _content(content, where)
    raw_calls = message.get("tool_calls")
    calls = tuple(_tool_calls(raw_calls, where)) if raw_calls else ()
    has_reasoning = message.get("reasoning_blocks") or message.get("reasoning")
    blocks = (
        tuple(_reasoning_blocks(message, where))
        if has_reasoning or message.get("signature")
        else ()
    )
    name = message.get("name")
    tool_call_id = message.get("tool_call_id")
    return ChatMessage(
        role=role,
        content=content,
        name=str(name) if name else None,
        tool_calls=calls,
        tool_call_id=str(tool_call_id) if tool_call_id is not None else None,
        reasoning_blocks=blocks,
        cache=cache,
        label=label,
    )


def _content(content: Any, where: str) -> str | tuple[ContentPart, ...]:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence):
        raise FormatError(
            f"message content must be text or parts, not {type(content).__name__}",
            source="prompt",
            field=f"{where}.content",
        )
    parts: list[ContentPart] = []
    for k, part in enumerate(content):
        if isinstance(part, WireTextPart | WireImagePart):
            parts.append(part)
            continue
        if not isinstance(part, Mapping):
            raise FormatError(
                "a content part must be an object", source="prompt", field=f"{where}.content[{k}]"
            )
        kind = part.get("type")
        if kind == "text":
            parts.append(WireTextPart(str(part.get("text") or "")))
        elif kind in ("image_url", "image"):
            parts.append(_image(part, f"{where}.content[{k}]"))
        else:
            raise FormatError(
                f"unsupported content part type {kind!r}",
                source="prompt",
                field=f"{where}.content[{k}].type",
            )
    return tuple(parts)


def _image(part: Mapping[str, Any], where: str) -> WireImagePart:
    ref = part.get("image_url")
    if isinstance(ref, Mapping):
        url = ref.get("url")
        detail = ref.get("detail")
    else:
        url = ref if isinstance(ref, str) else part.get("url")
        detail = part.get("detail")
    data = part.get("data")
    if not url and not data:
        raise FormatError("an image part needs a url or data", source="prompt", field=where)
    if url:
        return WireImagePart(url=str(url), detail=str(detail) if detail else None)
    mime = part.get("mime") or part.get("mime_type") or "image/png"
    return WireImagePart(
        data=str(data), mime_type=str(mime), detail=str(detail) if detail else None
    )


def _tool_calls(calls: Iterable[Any], where: str) -> Iterable[WireToolCall]:
    for index, call in enumerate(calls):
        if isinstance(call, WireToolCall):
            yield call
            continue
        if not isinstance(call, Mapping):
            raise FormatError(
                "a tool call must be an object", source="prompt", field=f"{where}.tool_calls"
            )
        function = call.get("function") or {}
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        yield WireToolCall(
            index=index,
            id=str(call.get("id") or ""),
            name=str(function.get("name") or ""),
            arguments=arguments,
            signature=call.get("signature") or None,
        )


def _reasoning_blocks(message: Mapping[str, Any], where: str) -> Iterable[ReasoningBlock]:
    prepared = message.get("reasoning_blocks")
    if prepared:
        for block in prepared:
            if isinstance(block, ReasoningBlock):
                yield block
            elif isinstance(block, Mapping):
                yield ReasoningBlock(
                    text=str(block.get("text") or ""),
                    signature=block.get("signature") or None,
                    redacted=bool(block.get("redacted")),
                    data=block.get("data") or None,
                    format=block.get("format") or None,
                )
            else:
                raise FormatError(
                    "a reasoning block must be an object",
                    source="prompt",
                    field=f"{where}.reasoning_blocks",
                )
        return
    reasoning = message.get("reasoning")
    signature = message.get("signature")
    if reasoning or signature:
        yield ReasoningBlock(text=str(reasoning or ""), signature=signature or None)
