"""Continuing a reply that a failed attempt already partly delivered.

When an attempt dies after part of the reply reached the user, the next attempt continues it
instead of regenerating it. The text delivered so far (joined across every failed attempt) is
*carried*; once any text is carried it replaces the turn's manual or preset prefill. The next
attempt receives it

- as a **native prefill** (a trailing assistant message) when the model can continue one, or
- as a **tail directive**: a user-role ``[System: …]`` message (persona-neutral, wording
  configurable) that shows the text as already sent and asks only for what follows.

Either way the stream strips the model's echo of the carried text character-exactly, across
chunk boundaries (:class:`EchoStripper`), so only the continuation is shown. Carried text is
data: it is never macro-evaluated, and templates are filled by plain replacement so braces in
it stay literal.

Text is shown as it arrives; the carried text ends at the last clause a failed attempt
delivered, its unfinished tail taken back from view (:class:`TextPipe`).

The speaker guard discards a reply that starts as the user's turn (one retry, with a
directive) and cuts a reply where another speaker's label begins.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tavernkit.providers.request import ChatMessage

__all__ = [
    "DEFAULT_CONTINUE_DIRECTIVE",
    "DEFAULT_PREFILL_DIRECTIVE",
    "DEFAULT_SPEAKER_DIRECTIVE",
    "ClauseBuffer",
    "ContinuationConfig",
    "EchoStripper",
    "PrefillPlan",
    "SpeakerGuard",
    "TextPipe",
    "fill",
    "join_gap",
    "plan_prefill",
    "tail_directive",
]

DEFAULT_CONTINUE_DIRECTIVE = (
    "The reply was interrupted. This part of it was already sent and the reader has seen it:\n"
    '"""\n{text}\n"""\n'
    "Write only what comes next, starting exactly where it stopped. Do not repeat any of it."
)
DEFAULT_PREFILL_DIRECTIVE = (
    'Begin your next reply with: "{text}". Continue directly after it without repeating it.'
)
DEFAULT_SPEAKER_DIRECTIVE = (
    "Your previous attempt started as the wrong speaker and was discarded. "
    "Reply only as {char}, never as {user}."
)


@dataclass(frozen=True, slots=True)
class ContinuationConfig:
    enabled: bool = True
    directive: str = DEFAULT_CONTINUE_DIRECTIVE
    prefill_directive: str = DEFAULT_PREFILL_DIRECTIVE
    speaker_directive: str = DEFAULT_SPEAKER_DIRECTIVE
    #: how long to wait after a timeout for deliveries already under way
    settle_seconds: float = 5.0


def fill(template: str, **values: str) -> str:
    """``template`` with ``{name}`` replaced verbatim (no format spec, no macro evaluation)."""
    for name, value in values.items():
        template = template.replace("{" + name + "}", value)
    return template


def tail_directive(*directives: str) -> ChatMessage:
    """One user-role ``[System: …]`` message holding every directive."""
    return ChatMessage("user", "[System: " + "\n\n".join(d for d in directives if d) + "]")


@dataclass(frozen=True, slots=True)
class PrefillPlan:
    """How an attempt starts its reply.

    ``text`` is what the visible reply must start with; ``sent`` says it was already
    delivered (carried text), so it must not be emitted again; ``message`` is what the request
    ends with (``None`` for no prefill).
    """

    mode: Literal["native", "directive", "none"]
    source: Literal["carried", "manual", "none"]
    text: str = ""
    sent: bool = False
    message: ChatMessage | None = None
    #: the directive's own words (directive mode), to combine with other directives
    directive: str = ""


def plan_prefill(
    carried: str,
    manual: str,
    *,
    supports_prefill: bool,
    config: ContinuationConfig,
) -> PrefillPlan:
    if carried and config.enabled:
        if supports_prefill:
            return PrefillPlan(
                "native", "carried", carried, True, ChatMessage("assistant", carried)
            )
        words = fill(config.directive, text=carried)
        return PrefillPlan("directive", "carried", carried, True, tail_directive(words), words)
    if carried:
        # continuation switched off: start fresh, but never re-send the delivered text
        return PrefillPlan("none", "none")
    text = manual.strip()
    if not text:
        return PrefillPlan("none", "none")
    if supports_prefill:
        return PrefillPlan("native", "manual", text, False, ChatMessage("assistant", text))
    words = fill(config.prefill_directive, text=text)
    return PrefillPlan("directive", "manual", text, False, tail_directive(words), words)


class EchoStripper:
    """Removes a leading echo of ``target`` from a stream, character by character.

    Characters that match so far are held back (the match may span chunks). On the first
    mismatch the held characters are released with the rest, so nothing the model wrote is
    lost; on a complete match they are dropped. A stream that ends mid-match releases them.
    """

    __slots__ = ("_held", "_matched", "done", "target")

    def __init__(self, target: str) -> None:
        self.target = target
        self._matched = 0
        self._held: list[str] = []
        self.done = not target

    def feed(self, text: str) -> str:
        if self.done:
            return text
        target = self.target
        i = 0
        n = len(text)
        while i < n and self._matched < len(target):
            if text[i] != target[self._matched]:
                self.done = True
                out = "".join(self._held) + text[i:]
                self._held.clear()
                return out
            self._held.append(text[i])
            self._matched += 1
            i += 1
        if self._matched == len(target):
            self.done = True
            self._held.clear()
            return text[i:]
        return ""

    def finish(self) -> str:
        self.done = True
        out = "".join(self._held)
        self._held.clear()
        return out

    @property
    def stripped(self) -> bool:
        return self.done and self._matched == len(self.target) and bool(self.target)


_SENTENCE_END = ".!?…"


def join_gap(before: str, after: str) -> str:
    """The space a continuation needs after a finished sentence (``"said."`` + ``"Then"``).

    Only after sentence punctuation: a cut inside a word (``"Th"`` + ``"en"``) joins as is.
    """
    if before and after and before[-1] in _SENTENCE_END and after[0].isalnum():
        return " "
    return ""


class SpeakerGuard:
    """Detects a reply written as another speaker (``Name:`` at the start of a line)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(n for n in names if n)
        pattern = "|".join(re.escape(n) for n in sorted(self.names, key=len, reverse=True))
        self._start = re.compile(rf"\s*(?:{pattern})\s*:") if pattern else None
        self._line = re.compile(rf"\n[ \t]*(?:{pattern})\s*:") if pattern else None
        self._longest = max((len(n) for n in self.names), default=0) + 2

    @property
    def active(self) -> bool:
        return self._start is not None

    def decide_start(self, text: str) -> Literal["ok", "wrong", "undecided"]:
        """Whether the reply so far starts as the wrong speaker (``undecided``: need more)."""
        if self._start is None:
            return "ok"
        if self._start.match(text):
            return "wrong"
        stripped = text.lstrip()
        if len(stripped) < self._longest and "\n" not in stripped and ":" not in stripped:
            return "undecided"
        return "ok"

    @property
    def window(self) -> int:
        """How many characters before new text a label may have started in."""
        return self._longest + 8

    def cut(self, text: str) -> int | None:
        """Where another speaker's line starts inside ``text``."""
        if self._line is None:
            return None
        match = self._line.search(text)
        return match.start() if match else None


_LAST_END = re.compile(r".*[.!?…\n]", re.DOTALL)
_CLOSERS = frozenset("\"'”’)]*_")


class ClauseBuffer:
    """Tracks the unfinished clause of a stream.

    Text is released up to the last clause boundary (sentence punctuation or a newline, with
    closing quotes and emphasis marks); the tail is pending until the next boundary. A
    suppressed error then gives up only the unfinished clause, which the continuation writes
    again (a :class:`TextPipe` in live mode shows the tail as it comes and takes it back then;
    a sink that cannot take text back holds it here). ``mode="delta"`` releases everything at
    once.
    """

    __slots__ = ("_pending", "mode")

    def __init__(self, mode: Literal["clause", "delta"] = "clause") -> None:
        self.mode = mode
        self._pending = ""

    def push(self, text: str) -> str:
        if self.mode == "delta":
            return text
        # only the new text can hold a new boundary; a greedy match finds its last one
        match = _LAST_END.match(text)
        if match is None:
            self._pending += text
            return ""
        combined = self._pending + text
        end = len(self._pending) + match.end()
        while end < len(combined) and combined[end] in _CLOSERS:
            end += 1
        out, self._pending = combined[:end], combined[end:]
        return out

    def take(self) -> str:
        out, self._pending = self._pending, ""
        return out

    def stood_by(self, text: str) -> str:
        """``text`` up to its last clause boundary in ``clause`` mode (all of it in
        ``delta``): what of a delivered text a continuation may follow."""
        if self.mode == "delta":
            return text
        match = _LAST_END.match(text)
        if match is None:
            return ""
        end = match.end()
        while end < len(text) and text[end] in _CLOSERS:
            end += 1
        return text[:end]

    def discard(self) -> str:
        return self.take()

    def drop_tail(self, count: int) -> int:
        """Remove up to ``count`` characters from the end of the held text; returns how many
        (text already released cannot be taken back)."""
        removed = min(count, len(self._pending))
        if removed:
            self._pending = self._pending[: len(self._pending) - removed]
        return removed

    @property
    def pending(self) -> str:
        return self._pending


class TextPipe:
    """One attempt's visible text: echo strip, speaker guard, prefill, join, clause tracking.

    :meth:`feed` returns the text to show now; with ``hold`` everything is kept for later
    (drafting, non-streaming). ``visible`` is this attempt's reply text, including a manual
    prefill it had to show.

    In ``clause`` mode text is shown as it arrives, and the :class:`ClauseBuffer` only tracks
    where the last clause ended: what follows it is the *unfinished tail*, shown but not yet
    stood by. A suppressed failure takes the tail back (:meth:`abandon`), so the carried text
    ends at a clause and the continuation writes the tail again, shown once. A start the
    speaker guard has not decided yet is shown too (*provisional*); a start that turns out to
    be the user's is taken back. What to take back waits in :attr:`withdrawn`
    (:meth:`take_withdrawn`). ``delta`` mode carries everything and takes nothing back.
    """

    def __init__(
        self,
        prefill: PrefillPlan,
        *,
        carried: str,
        guard: SpeakerGuard,
        segment: Literal["clause", "delta"] = "clause",
        hold: bool = False,
        lead: str = "\n",
        echo: str = "",
    ) -> None:
        """``lead``: what a fresh reply may not start with (a text model's reply starts
        after ``Name:`` with a space that is not part of it). ``echo``: text the reply
        continues (a continued message); a leading copy of it is stripped as carried text's
        is, byte for byte, before the prefill's own echo."""
        self.lead = lead
        self.prefill = prefill
        self.carried = carried
        self.guard = guard
        self.hold = hold
        self.echo = EchoStripper(echo)
        self.stripper = EchoStripper(prefill.text)
        self.buffer = ClauseBuffer(segment)
        self.live = segment == "clause" and not hold
        self.decided = not guard.active
        self.started = False
        self.wrong_speaker = False
        self.cut = False
        #: shown text to take back now (the caller sends it as a withdrawal)
        self.withdrawn = ""
        self._undecided = ""
        #: what was shown of an undecided start
        self._provisional = ""
        self._visible = ""
        self._fast = False
        self._guarded = guard.active
        #: fast-path pieces not yet folded into ``_visible`` (joined once, on demand)
        self._tail: list[str] = []

    @property
    def visible(self) -> str:
        if self._tail:
            self._visible += "".join(self._tail)
            self._tail.clear()
        return self._visible

    def take_withdrawn(self) -> str:
        out, self.withdrawn = self.withdrawn, ""
        return out

    def feed(self, raw: str) -> str:
        if self._fast:
            # the common case once a reply is under way: nothing left to decide
            self._tail.append(raw)
            if self.hold:
                return ""
            released = self.buffer.push(raw)
            return raw if self.live else released
        return self._accept(self.stripper.feed(self.echo.feed(raw)))

    def _accept(self, piece: str) -> str:
        if not piece or self.wrong_speaker or self.cut:
            return ""
        if not self.decided:
            self._undecided += piece
            verdict = self.guard.decide_start(self._undecided)
            if verdict == "undecided":
                return self._show_provisional()
            if verdict == "wrong":
                self.wrong_speaker = True
                self._take_back_provisional()
                return ""
            piece, self._undecided, self.decided = self._undecided, "", True
        if not self.started:
            opened = self._opening(piece)
            if opened is None:
                return ""  # leading blank lines of a fresh reply are noise
            piece = opened
            self.started = True
        self._fast = self.echo.done and self.stripper.done and not self._guarded and not self.cut
        if self.guard.active:
            piece = self._speaker_cut(piece)
        self._visible = self.visible + piece
        if self.hold or not piece:
            return self._after_provisional("")
        released = self.buffer.push(piece)
        return self._after_provisional(piece if self.live else released)

    def _opening(self, piece: str) -> str | None:
        """A reply's first piece as it shows (``None``: blank noise before a fresh reply)."""
        # A continued reply's leading space or newline is the break between the old text
        # and the new; only a fresh reply's is noise.
        fresh = not self.echo.target
        if fresh and not piece.strip() and not self.prefill.text:
            return None
        shown = self.prefill.text if not self.prefill.sent else ""
        body = piece.lstrip(self.lead) if fresh and not shown and not self.carried else piece
        return shown + join_gap(self.carried + shown, body) + body

    def _show_provisional(self) -> str:
        """An undecided start, shown as it would open the reply (live mode only)."""
        if not self.live or self.started:
            return ""
        opened = self._opening(self._undecided) or ""
        if not opened.startswith(self._provisional):
            self._take_back_provisional()
        new = opened[len(self._provisional) :]
        self._provisional = opened
        return new

    def _take_back_provisional(self) -> None:
        if self._provisional:
            self.withdrawn += self._provisional
            self._provisional = ""

    def _after_provisional(self, out: str) -> str:
        """What to show of a decided piece, given the provisional start already shown."""
        shown = self._provisional
        if not shown:
            return out
        self._provisional = ""
        if out.startswith(shown):
            return out[len(shown) :]
        self.withdrawn += shown
        return out

    def _speaker_cut(self, piece: str) -> str:
        start = max(0, len(self._visible) - self.guard.window)
        index = self.guard.cut(self._visible[start:] + piece)
        if index is None:
            return piece
        self.cut = True
        keep = start + index
        if keep >= len(self._visible):
            return piece[: keep - len(self._visible)]
        extra = len(self._visible) - keep
        removed = extra if self.hold else self.buffer.drop_tail(extra)
        if removed and self.live:
            # shown as it arrived: the other speaker's label is taken back
            self.withdrawn += self._visible[len(self._visible) - removed :]
        self._visible = self._visible[: len(self._visible) - removed]
        return ""

    def finish(self) -> str:
        """The rest at a clean end of stream (held echo, undecided start, unfinished clause
        when it was held)."""
        out = self._accept(self.stripper.feed(self.echo.finish()) + self.stripper.finish())
        if not self.decided and self._undecided:
            text, self._undecided = self._undecided, ""
            if self.guard.decide_start(text) == "wrong":
                self.wrong_speaker = True
                self._take_back_provisional()
                return out
            self.decided = True
            out += self._accept(text)
        if self.hold or self.wrong_speaker:
            return out
        rest = self.buffer.take()
        return out if self.live else out + rest

    def abandon(self) -> str:
        """A suppressed failure gives up what the attempt has not stood by: an undecided
        start and the unfinished clause (the continuation writes it instead). Returns what to
        show now (nothing); shown text to take back is left in :attr:`withdrawn`."""
        return self._give_up(keep_tail=False)

    def keep(self) -> str:
        """A visible failure: the unfinished clause stays (returned when it was held, to show
        now); an undecided start is taken back (left in :attr:`withdrawn`)."""
        return self._give_up(keep_tail=True)

    def _give_up(self, *, keep_tail: bool) -> str:
        self._take_back_provisional()
        tail = self.buffer.discard()
        if keep_tail:
            return "" if self.live else tail
        if self.live and tail:
            self.withdrawn += tail
        return ""
