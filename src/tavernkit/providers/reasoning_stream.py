"""Reasoning written inline as text (``<think>…</think>``), split off while the reply streams.

Models served without a reasoning field (a local GGUF, a text-completion backend, DeepSeek R1
distills behind a plain OpenAI-compatible server) write their reasoning into the text between
the delimiters of a reasoning template. :class:`TagReasoningSplitter` turns such a stream's
:class:`TextDelta` events into :class:`ReasoningDelta` + :class:`TextDelta` with SillyTavern's
auto-parse rules (``autoParseReasoningFromMessage``), the same rules as
:class:`tavernkit.prompt.reasoning.ReasoningStreamParser`:

- only a reply that *starts* with the prefix (and is longer than it) has a reasoning block;
  anything else is all reply text;
- everything after the prefix is reasoning until the suffix; a stream that ends inside the
  block leaves it all as reasoning;
- after the suffix, leading newlines are dropped and a reply of only whitespace is empty;
- a reply whose reasoning came in a field (a :class:`ReasoningDelta` before its first text)
  is not parsed: its text passes on unchanged.

The prompt module's parser re-reads the whole text on every update (it is fed snapshots);
a stream needs deltas, and re-scanning a growing text per token would make a long reply
quadratic, so this one is an incremental state machine that holds back only the few
characters that could still be the start of a delimiter. It lives here, not in ``prompt/``,
because adapters must not import the prompt layer. The two are tested against each other.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from tavernkit.providers.events import (
    Finish,
    ProviderErrorEvent,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
)

__all__ = [
    "Delimiters",
    "TagReasoningParser",
    "TagReasoningSplitter",
    "split_tag_reasoning",
]


class Delimiters(Protocol):
    """What the splitter needs of a reasoning template (``models.ReasoningTemplate`` fits)."""

    @property
    def prefix(self) -> str | None: ...

    @property
    def suffix(self) -> str | None: ...


_State = Literal["start", "thinking", "after", "reply"]


def _partial_tail(text: str, delimiter: str) -> int:
    """Length of the longest end of ``text`` that is a proper start of ``delimiter``."""
    for size in range(min(len(text), len(delimiter) - 1), 0, -1):
        if delimiter.startswith(text[-size:]):
            return size
    return 0


@dataclass(slots=True)
class TagReasoningParser:
    """The state machine for one reply: feed text pieces, get ``(reasoning, text)`` pieces.

    ``in_reasoning`` starts inside the block: a continued message whose reasoning was cut off
    (the prefix is then implied, as SillyTavern prepends the incomplete prefix on continue).
    """

    prefix: str
    suffix: str
    in_reasoning: bool = False
    state: _State = "start"
    _held: str = ""
    _parts: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.prefix or not self.suffix:
            self.state = "reply"  # a template without both delimiters parses nothing
        elif self.in_reasoning:
            self.state = "thinking"

    @property
    def fresh(self) -> bool:
        """Nothing of the reply seen yet (empty pieces are nothing)."""
        return self.state == "start" and not self._held

    def feed(self, text: str) -> tuple[str, str]:
        """The reasoning and reply text that ``text`` completes (either may be empty)."""
        if self.state == "reply":
            return "", text
        held = self._held + text
        self._held = ""
        if self.state == "start":
            if len(held) <= len(self.prefix):
                if self.prefix.startswith(held):
                    self._held = held  # may still become the prefix: show nothing yet
                    return "", ""
                self.state = "reply"
                return "", held
            if not held.startswith(self.prefix):
                self.state = "reply"
                return "", held
            self.state = "thinking"
            held = held[len(self.prefix) :]
        if self.state == "thinking":
            end = held.find(self.suffix)
            if end < 0:
                keep = _partial_tail(held, self.suffix)
                self._held = held[len(held) - keep :] if keep else ""
                return held[: len(held) - keep], ""
            self.state = "after"
            reasoning, held = held[:end], held[end + len(self.suffix) :]
            return reasoning, self._after(held)
        return "", self._after(held)

    def _after(self, text: str) -> str:
        # After the block, leading newlines go and a reply of only whitespace is empty: so
        # whitespace is held until something visible arrives.
        if self.state == "reply":
            return text
        held = self._held + text
        if not held.strip():
            self._held = held
            return ""
        self._held = ""
        self.state = "reply"
        return held.lstrip("\n")

    def finish(self) -> tuple[str, str]:
        """What was held back when the reply ends: a cut-off block stays reasoning, a reply
        that was only (part of) the prefix is shown as text, trailing whitespace after the
        block is dropped."""
        held, self._held = self._held, ""
        if self.state == "thinking":
            return held, ""
        if self.state == "start":
            self.state = "reply"
            return "", held
        return "", ""


@dataclass(slots=True)
class TagReasoningSplitter:
    """Event-stream form: ``TextDelta`` in, ``ReasoningDelta`` + ``TextDelta`` out, per choice.

    Other events pass through in order; whatever a choice still holds is released before its
    ``Finish`` and before an error event, so nothing is lost and nothing is reordered. A
    choice's text that follows reasoning from a field is left as it is (see the module
    docstring).
    """

    template: Delimiters
    in_reasoning: bool = False
    _parsers: dict[int, TagReasoningParser] = field(default_factory=dict)

    def _parser(self, choice: int) -> TagReasoningParser:
        parser = self._parsers.get(choice)
        if parser is None:
            parser = TagReasoningParser(
                self.template.prefix or "",
                self.template.suffix or "",
                in_reasoning=self.in_reasoning,
            )
            self._parsers[choice] = parser
        return parser

    @staticmethod
    def _emit(pieces: tuple[str, str], choice: int, out: list[StreamEvent]) -> None:
        reasoning, text = pieces
        if reasoning:
            out.append(ReasoningDelta(reasoning, choice=choice))
        if text:
            out.append(TextDelta(text, choice))

    def _native(self, event: ReasoningDelta) -> None:
        # SillyTavern auto-parses only while no reasoning has come in a field (its handler is
        # still in state None): a choice whose field reasoning precedes its text keeps its
        # text as the model wrote it (a parser without delimiters passes everything on).
        parser = self._parsers.get(event.choice)
        if event.text and (parser is None or parser.fresh):
            self._parsers[event.choice] = TagReasoningParser("", "")

    def _text(self, event: TextDelta) -> list[StreamEvent]:
        parser = self._parser(event.choice)
        if parser.state == "reply":
            # past the block, or none: with auto-parse on every turn's stream comes through
            # here, so the reply's own events pass as they are (no copy per piece)
            return [event]
        out: list[StreamEvent] = []
        self._emit(parser.feed(event.text), event.choice, out)
        return out

    def feed(self, event: StreamEvent) -> list[StreamEvent]:
        if isinstance(event, TextDelta):
            return self._text(event)
        out: list[StreamEvent] = []
        if isinstance(event, ReasoningDelta):
            self._native(event)
        elif isinstance(event, Finish):
            parser = self._parsers.get(event.choice)
            if parser is not None:
                self._emit(parser.finish(), event.choice, out)
        elif isinstance(event, ProviderErrorEvent):
            out.extend(self.finish())
        out.append(event)
        return out

    def finish(self) -> list[StreamEvent]:
        """Release what every choice still holds (the stream ended without a ``Finish``)."""
        out: list[StreamEvent] = []
        for choice, parser in self._parsers.items():
            self._emit(parser.finish(), choice, out)
        return out


async def split_tag_reasoning(
    events: AsyncIterable[StreamEvent], template: Delimiters, *, in_reasoning: bool = False
) -> AsyncGenerator[StreamEvent, None]:
    """``events`` with inline reasoning split off by ``template``'s delimiters."""
    splitter = TagReasoningSplitter(template, in_reasoning=in_reasoning)
    try:
        async for event in events:
            for out in splitter.feed(event):
                yield out
        for out in splitter.finish():
            yield out
    finally:
        # close the source now, not when it is garbage-collected: a local model's worker
        # stops generating only when its stream is closed
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
