"""Per-attempt context: one prompt, assembled once, shaped for each attempt's model.

The prompt engine builds the prompt once, for the planned model. A fallback model may be
smaller, blind or without tools, so every attempt adapts it here:

- image parts become text placeholders when the model cannot see;
- blocks marked ``requires_tool_calling`` are dropped when the attempt has no tools;
- history is re-trimmed **from the untrimmed original** to the model's window minus the
  output reserve (trimming an already-trimmed list would lose messages a larger fallback could
  hold); an adapter may own the fitting instead (NovelAI's tier-dependent window);
- the prefill's tokens are reserved against the same budget but the prefill is appended
  after trimming, because a ``[System: …]`` tail directive is a user turn that the truncator
  would otherwise protect in place of the real trigger message;
- the provider's saved sampler settings apply; an explicit per-user output limit overrides
  the server's, and both clamp to the model's output ceiling.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from tavernkit.errors import ContextTooLong
from tavernkit.generation.blocks import Fitter, TurnBlock
from tavernkit.prompt.convert import message_from_dict
from tavernkit.providers.profiles import ModelProfile
from tavernkit.providers.request import (
    ChatMessage,
    ChatPrompt,
    MessageLabel,
    ResponseFormat,
    Sampling,
    ToolChoice,
    ToolSpec,
    WireImagePart,
    WireTextPart,
)
from tavernkit.worldinfo.tokens import ByteEstimate

__all__ = [
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "NO_LIMITS",
    "AdaptedRequest",
    "ByteEstimate",
    "Fitter",
    "ReplyLimits",
    "TokenCounter",
    "TurnBlock",
    "TurnPrompt",
    "adapt_request",
    "apply_samplers",
    "clamp_max_tokens",
    "message_tokens",
]

#: per-message framing tokens (role, separators), as OpenAI's own counting recipe adds
MESSAGE_OVERHEAD = 4
#: what an image costs in the budget when the model sees it (a low-detail tile)
IMAGE_TOKENS = 85
_IMAGE_PLACEHOLDER = "[image]"


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...


#: the same prompt post-processed for another chat-completion source, from its blocks
Reshape = Callable[[str], "TurnPrompt"]


@dataclass(frozen=True, slots=True)
class TurnPrompt:
    """The untrimmed prompt of a turn, as the prompt engine assembled it for the planned
    model, plus the turn's manual or preset ``prefill`` (already macro-evaluated).

    ``source`` is the chat-completion source its messages were post-processed for (squash,
    merge, Claude/Gemini conversion); ``reshape`` makes the same prompt for another source
    from the prompt builder's labelled blocks, so a fallback attempt to another family gets
    what a direct request to it would (:meth:`for_source`), never a conversion of the first
    family's output."""

    blocks: tuple[TurnBlock, ...]
    sampling: Sampling = field(default_factory=Sampling)
    stop: tuple[str, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice | None = None
    response_format: ResponseFormat | None = None
    reasoning_effort: str | None = None
    reasoning_budget: int | None = None
    prefill: str = ""
    source: str = ""
    reshape: Reshape | None = field(default=None, compare=False, repr=False)

    def for_source(self, source: str) -> TurnPrompt:
        """This prompt for an attempt on ``source``: itself when it was made for that source
        (or cannot be remade), else the prompt remade from the blocks for it."""
        if self.reshape is None or not source or source == self.source:
            return self
        return self.reshape(source)

    @classmethod
    def from_chat_prompt(
        cls,
        prompt: ChatPrompt,
        *,
        prefill: str = "",
        trim: bool = True,
        source: str = "",
        reshape: Reshape | None = None,
    ) -> TurnPrompt:
        """The blocks of ``prompt``, read from the labels the prompt builder gave its messages
        (see :class:`~tavernkit.providers.request.MessageLabel`): only history (chat messages
        and their tool exchanges) may be trimmed, so preset entries, examples, world-info
        depth injections and an in-chat author's note stay whatever the window; tool-only
        messages are flagged for a model without tools; the last user message of the history
        (the trigger) and the last history message (a continued reply) are protected. A
        message without a label in a labelled prompt (a hook's addition) is kept whole.

        A request without any label (built by hand, not by the prompt builder) falls back to
        a guess: every non-system message is history, the last user message the trigger.
        ``trim=False`` keeps every message (a task's own messages must reach the model whole:
        a prompt too long for the model is then ``ContextTooLong``, not a silent cut)."""
        messages = prompt.messages
        if any(m.label is not None for m in messages):
            blocks = _labelled_blocks(messages, trim)
        else:
            last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
            blocks = tuple(
                TurnBlock(m, history=trim and m.role != "system", protected=i == last_user)
                for i, m in enumerate(messages)
            )
        return cls(
            blocks,
            sampling=prompt.sampling,
            stop=prompt.stop,
            tools=prompt.tools,
            tool_choice=prompt.tool_choice,
            response_format=prompt.response_format,
            reasoning_effort=prompt.reasoning_effort,
            reasoning_budget=prompt.reasoning_budget,
            prefill=prefill,
            source=source,
            reshape=reshape,
        )

    @classmethod
    def from_blocks(cls, blocks: Sequence[Any], **kwargs: Any) -> TurnPrompt:
        """From the prompt engine's labelled blocks (anything with ``message`` as an
        OpenAI-shaped dict, ``source`` and ``requires_tool_calling``): each message gets its
        block's label and the blocks follow the rule of :meth:`from_chat_prompt`."""
        messages = tuple(
            message_from_dict(
                b.message,
                where=f"blocks[{i}].message",
                label=MessageLabel(
                    kind=str(getattr(b, "source", "") or "preset"),
                    identifier=str(getattr(b, "identifier", "") or ""),
                    tool_only=bool(getattr(b, "requires_tool_calling", False)),
                ),
            )
            for i, b in enumerate(blocks)
        )
        return cls(_labelled_blocks(messages, trim=True), **kwargs)


def _labelled_blocks(messages: Sequence[ChatMessage], trim: bool) -> tuple[TurnBlock, ...]:
    history = [m.label is not None and m.label.trimmable for m in messages]
    last = max((i for i, h in enumerate(history) if h), default=-1)
    trigger = max(
        (i for i, h in enumerate(history) if h and messages[i].role == "user"), default=-1
    )
    return tuple(
        TurnBlock(
            m,
            history=trim and history[i],
            protected=i in (last, trigger),
            requires_tool_calling=m.label is not None and m.label.tool_only,
        )
        for i, m in enumerate(messages)
    )


def message_tokens(message: ChatMessage, counter: TokenCounter) -> int:
    if isinstance(message.content, str):
        return counter.count(message.content) + MESSAGE_OVERHEAD
    total = MESSAGE_OVERHEAD
    for part in message.content:
        total += counter.count(part.text) if isinstance(part, WireTextPart) else IMAGE_TOKENS
    return total


def _without_images(message: ChatMessage) -> ChatMessage:
    if isinstance(message.content, str) or not message.has_images():
        return message
    parts = tuple(
        WireTextPart(_IMAGE_PLACEHOLDER) if isinstance(p, WireImagePart) else p
        for p in message.content
    )
    return replace(message, content=parts)


def clamp_max_tokens(server: int | None, user: int | None, ceiling: int | None) -> int | None:
    """The output limit: the user's explicit one wins over the server's; both clamp to the
    model's ceiling. ``None`` when nobody set one."""
    chosen = user if user is not None else server
    if chosen is None:
        return None
    return min(chosen, ceiling) if ceiling else chosen


_SAMPLING_FIELDS = frozenset(f.name for f in dataclasses.fields(Sampling))


def apply_samplers(
    base: Sampling,
    saved: Mapping[str, Any],
    user_max: int | None,
    ceiling: int,
    cap: int | None = None,
) -> Sampling:
    """``base`` with a provider's saved sampler settings and the clamped output limit;
    ``cap`` (a payer's) lowers that limit, and is the limit when nothing else set one."""
    overrides = {k: v for k, v in saved.items() if k in _SAMPLING_FIELDS and v is not None}
    server_max = overrides.pop("max_tokens", base.max_tokens)
    limit = clamp_max_tokens(server_max, user_max, ceiling)
    if cap is not None:
        limit = cap if limit is None else min(limit, cap)
    if limit != base.max_tokens:
        overrides["max_tokens"] = limit
    return replace(base, **overrides) if overrides else base


@dataclass(frozen=True, slots=True)
class AdaptedRequest:
    request: ChatPrompt
    budget: int
    dropped_history: int = 0
    dropped_tool_blocks: int = 0
    downgrades: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ReplyLimits:
    """How long a reply may be: the profile's saved samplers, the user's max tokens, the
    entry's cap, and the room reserved when none of them sets a length."""

    samplers: Mapping[str, Any] | None = None
    user_max_tokens: int | None = None
    max_tokens_cap: int | None = None
    default_reserve: int = 1024

    def apply(self, sampling: Sampling, profile: ModelProfile) -> tuple[Sampling, int]:
        """The request's sampling with the limits applied, and the tokens reserved for the
        reply."""
        sampling = apply_samplers(
            sampling,
            self.samplers or {},
            self.user_max_tokens,
            profile.max_output_tokens,
            self.max_tokens_cap,
        )
        return sampling, sampling.max_tokens or min(self.default_reserve, profile.max_output_tokens)


NO_LIMITS = ReplyLimits()


def _usable_blocks(
    prompt: TurnPrompt, profile: ModelProfile, use_tools: bool
) -> tuple[list[tuple[int, TurnBlock]], int, list[str]]:
    """The blocks this model can take (with their indices): tool blocks left out without
    tools, images replaced by a placeholder without vision; how many tool blocks went, and
    the downgrades made."""
    downgrades: list[str] = []
    kept: list[tuple[int, TurnBlock]] = []
    dropped_tools = 0
    for index, block in enumerate(prompt.blocks):
        if block.requires_tool_calling and not use_tools:
            dropped_tools += 1
            continue
        if not profile.supports_vision and block.message.has_images():
            downgrades.append("image replaced by a text placeholder")
            block = replace(block, message=_without_images(block.message))
        kept.append((index, block))
    return kept, dropped_tools, downgrades


def _trimmed(
    kept: list[tuple[int, TurnBlock]],
    budget: int,
    counter: TokenCounter,
    cache: dict[int, int],
    profile: ModelProfile,
    outside: int,
) -> tuple[list[TurnBlock], int]:
    """The blocks that fit ``budget``: the oldest droppable history dropped first; how many
    went. :class:`ContextTooLong` when the rest does not fit (``outside``: the reserve and
    the fixed tail, for the error's prompt size)."""

    def cost(index: int, block: TurnBlock) -> int:
        if block.message.has_images() or index not in cache:
            cache[index] = message_tokens(block.message, counter)
        return cache[index]

    sizes = [cost(i, b) for i, b in kept]
    total = sum(sizes)
    droppable = [n for n, (_, b) in enumerate(kept) if b.history and not b.protected]
    removed: set[int] = set()
    for n in droppable:
        if total <= budget:
            break
        removed.add(n)
        total -= sizes[n]
    if total > budget:
        raise ContextTooLong(
            f"prompt needs {total} tokens; the window leaves {budget}",
            n_prompt=total + outside,
            n_ctx=profile.context_window,
            model=profile.model,
        )
    return [b for n, (_, b) in enumerate(kept) if n not in removed], len(removed)


def adapt_request(
    prompt: TurnPrompt,
    profile: ModelProfile,
    counter: TokenCounter,
    *,
    tools_enabled: bool = True,
    tail: Sequence[ChatMessage] = (),
    after: Sequence[ChatMessage] = (),
    limits: ReplyLimits = NO_LIMITS,
    fitter: Fitter | None = None,
    token_cache: dict[int, int] | None = None,
) -> AdaptedRequest:
    """The request for one attempt.

    ``tail`` (the prefill or tail directive) is reserved against the budget and appended
    after trimming; ``after`` is this attempt's tool history, kept whole (it is the work the
    attempt itself did). ``token_cache`` (block index -> tokens) lets a turn count each
    block once across attempts.
    """
    use_tools = tools_enabled and profile.supports_tools
    sampling, reserve = limits.apply(prompt.sampling, profile)
    fixed_tail = sum(message_tokens(m, counter) for m in (*tail, *after))
    budget = profile.context_window - reserve - fixed_tail

    kept, dropped_tools, downgrades = _usable_blocks(prompt, profile, use_tools)
    dropped = 0
    if fitter is not None:
        blocks = list(fitter([b for _, b in kept], budget, profile))
    else:
        cache = token_cache if token_cache is not None else {}
        blocks, dropped = _trimmed(kept, budget, counter, cache, profile, reserve + fixed_tail)

    messages = tuple(b.message for b in blocks) + tuple(after) + tuple(tail)
    request = ChatPrompt(
        messages,
        sampling=sampling,
        stop=prompt.stop,
        tools=prompt.tools if use_tools else (),
        tool_choice=prompt.tool_choice if use_tools else None,
        response_format=prompt.response_format,
        reasoning_effort=prompt.reasoning_effort,
        reasoning_budget=prompt.reasoning_budget,
    )
    return AdaptedRequest(request, budget, dropped, dropped_tools, tuple(dict.fromkeys(downgrades)))
