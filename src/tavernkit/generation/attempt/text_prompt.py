"""Per-attempt context for the text-completion family (kobold, textgen, llama.cpp, the embedded
model in text mode): one folded prompt string, shaped for each attempt's model.

The rules are those of :mod:`~tavernkit.generation.attempt.chat_prompt`, in text form:

- the prompt is kept as blocks (story string, examples, one block per chat message...) so a
  smaller fallback window is fitted **from the untrimmed original**, oldest history first,
  never the protected trigger;
- the reply *opening* (``Mira:``, an instruct output sequence) stays last; directives (the
  speaker guard's, a revision) go on their own line just before it, as a ``[System: …]`` line;
- a text model always continues its prompt, so the prefill (manual, or the carried text of a
  failed attempt) is appended after the opening: a native prefill by construction. Its tokens
  are reserved against the same budget but it is never trimmed away;
- the provider's saved sampler settings apply, the user's output limit overrides the
  server's, both clamp to the model's output ceiling.

Text models have no native tools, so there are no tool blocks to drop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tavernkit.errors import ContextTooLong
from tavernkit.generation.attempt.chat_prompt import (
    NO_LIMITS,
    ReplyLimits,
    TokenCounter,
    TurnPrompt,
    adapt_request,
)
from tavernkit.providers.profiles import ModelProfile
from tavernkit.providers.request import (
    ChatMessage,
    ChatPrompt,
    ResponseFormat,
    Sampling,
    TextPrompt,
)

if TYPE_CHECKING:
    from tavernkit.generation.plan import AttemptTarget

__all__ = [
    "AdaptedTextRequest",
    "RoundParts",
    "TextBlock",
    "TextTurnPrompt",
    "adapt_text_request",
    "attempt_request",
    "join_prefill",
]


@dataclass(frozen=True, slots=True)
class TextBlock:
    """A piece of the folded prompt; ``history`` pieces may be dropped (oldest first) unless
    ``protected``."""

    text: str
    history: bool = False
    protected: bool = False


@dataclass(frozen=True, slots=True)
class TextTurnPrompt:
    """The untrimmed text-completion prompt of a turn and its manual ``prefill``.

    ``"".join(b.text for b in blocks) + opening`` is the prompt as the builder made it.
    """

    blocks: tuple[TextBlock, ...]
    opening: str = ""
    sampling: Sampling = field(default_factory=Sampling)
    stop: tuple[str, ...] = ()
    response_format: ResponseFormat | None = None
    grammar: str | None = None
    prefill: str = ""

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.blocks) + self.opening

    @classmethod
    def from_text_prompt(cls, prompt: TextPrompt, *, prefill: str = "") -> TextTurnPrompt:
        """A finished prompt string and its last line as the opening (the line a text prompt
        ends with is where the reply starts: ``Mira:`` or an instruct output sequence), so
        directives can go before it. With the builder's labelled ``pieces`` each chat message
        is a ``history`` block a smaller window may drop (oldest first; the last one, the
        trigger, never) while the story string, examples and in-chat injections stay;
        without them the prompt is one fixed block."""
        body = prompt.prompt
        stripped = body.rstrip("\n")
        cut = stripped.rfind("\n") + 1
        head, opening = body[:cut], body[cut:]
        blocks = _labelled_blocks(prompt.pieces, cut) if prompt.pieces else ()
        if not blocks:
            blocks = (TextBlock(head),) if head else ()
        return cls(
            blocks,
            opening=opening,
            sampling=prompt.sampling,
            stop=prompt.stop,
            response_format=prompt.response_format,
            grammar=prompt.grammar,
            prefill=prefill,
        )

    @classmethod
    def from_pieces(
        cls,
        head: Sequence[str],
        history: Sequence[str],
        opening: str = "",
        *,
        tail: Sequence[str] = (),
        **kwargs: Any,
    ) -> TextTurnPrompt:
        """Fixed ``head`` pieces, droppable ``history`` pieces (oldest first; the last one is
        the trigger and protected), fixed ``tail`` pieces, then the opening."""
        blocks = [TextBlock(t) for t in head]
        blocks += [
            TextBlock(t, history=True, protected=i == len(history) - 1)
            for i, t in enumerate(history)
        ]
        blocks += [TextBlock(t) for t in tail]
        return cls(tuple(blocks), opening=opening, **kwargs)


def _labelled_blocks(pieces: Sequence[tuple[str, str]], cut: int) -> tuple[TextBlock, ...]:
    """The pieces before ``cut`` (where the opening starts) as blocks; the piece the cut
    falls in keeps its part before it. ``()`` when no history piece lies before the cut."""
    blocks: list[TextBlock] = []
    at = 0
    for kind, text in pieces:
        if at >= cut:
            break
        part = text[: cut - at]
        at += len(text)
        if part:
            blocks.append(TextBlock(part, history=kind == "history"))
    last = max((i for i, b in enumerate(blocks) if b.history), default=-1)
    if last < 0:
        return ()
    blocks[last] = TextBlock(blocks[last].text, history=True, protected=True)
    return tuple(blocks)


@dataclass(frozen=True, slots=True)
class AdaptedTextRequest:
    request: TextPrompt
    budget: int
    dropped_history: int = 0


def join_prefill(opening: str, prefill: str) -> str:
    """The reply opening and the text the reply starts with; ``Mira:`` and ``*smiles*`` join
    with a space, as SillyTavern joins its prompt bias (an instruct opening ends in a newline
    and joins as is)."""
    if opening and prefill and not opening[-1].isspace() and not prefill[0].isspace():
        return f"{opening} {prefill}"
    return opening + prefill


def directive_line(directives: Sequence[str]) -> str:
    words = "\n\n".join(d for d in directives if d)
    return f"[System: {words}]\n" if words else ""


def adapt_text_request(
    prompt: TextTurnPrompt,
    profile: ModelProfile,
    counter: TokenCounter,
    *,
    prefill: str = "",
    directives: Sequence[str] = (),
    limits: ReplyLimits = NO_LIMITS,
    token_cache: dict[int, int] | None = None,
) -> AdaptedTextRequest:
    """The text request for one attempt (see the module docstring). ``prefill`` is the text
    the reply starts with (already chosen between manual and carried)."""
    sampling, reserve = limits.apply(prompt.sampling, profile)
    directive = directive_line(directives)
    if directive and prompt.blocks and not prompt.blocks[-1].text.endswith("\n"):
        directive = "\n" + directive
    tail = directive + join_prefill(prompt.opening, prefill)
    fixed = counter.count(tail) if tail else 0
    budget = profile.context_window - reserve - fixed
    cache = token_cache if token_cache is not None else {}

    def cost(index: int, block: TextBlock) -> int:
        if index not in cache:
            cache[index] = counter.count(block.text)
        return cache[index]

    sizes = [cost(i, b) for i, b in enumerate(prompt.blocks)]
    total = sum(sizes)
    removed: set[int] = set()
    for index, block in enumerate(prompt.blocks):
        if total <= budget:
            break
        if block.history and not block.protected:
            removed.add(index)
            total -= sizes[index]
    if total > budget:
        raise ContextTooLong(
            f"prompt needs {total} tokens; the window leaves {budget}",
            n_prompt=total + reserve + fixed,
            n_ctx=profile.context_window,
            model=profile.model,
        )
    body = "".join(b.text for i, b in enumerate(prompt.blocks) if i not in removed)
    request = TextPrompt(
        body + tail,
        sampling=sampling,
        stop=prompt.stop,
        response_format=prompt.response_format,
        grammar=prompt.grammar,
    )
    return AdaptedTextRequest(request, budget, len(removed))


@dataclass(frozen=True, slots=True)
class RoundParts:
    """What one round of an attempt adds to the turn's prompt: a chat prompt's ``tail``
    (directive and prefill messages) and ``after`` (the tool history so far); a text
    prompt's ``directives`` (before its opening) and ``prefill`` (after it)."""

    tail: Sequence[ChatMessage] = ()
    after: Sequence[ChatMessage] = ()
    prefill: str = ""
    directives: Sequence[str] = ()


def attempt_request(
    prompt: TurnPrompt | TextTurnPrompt,
    target: AttemptTarget,
    counter: TokenCounter,
    parts: RoundParts,
    *,
    tools_enabled: bool,
    default_reserve: int,
    token_cache: dict[int, int],
) -> ChatPrompt | TextPrompt:
    """One attempt's request in either family, with this round's ``parts``."""
    limits = ReplyLimits(
        target.samplers, target.user_max_tokens, target.max_tokens_cap, default_reserve
    )
    if isinstance(prompt, TextTurnPrompt):
        return adapt_text_request(
            prompt,
            target.profile,
            counter,
            prefill=parts.prefill,
            directives=parts.directives,
            limits=limits,
            token_cache=token_cache,
        ).request
    return adapt_request(
        prompt,
        target.profile,
        counter,
        tools_enabled=tools_enabled,
        tail=parts.tail,
        after=parts.after,
        limits=limits,
        fitter=target.fitter,
        token_cache=token_cache,
    ).request
