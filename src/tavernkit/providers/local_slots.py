"""Which llama.cpp slot a request of the embedded model runs in (pure: nothing is loaded).

llama.cpp picks a slot itself by the longest common *prefix* of tokens, and past a threshold
(10 % of the prompt) by least recent use. A chat's prompt often changes near its top between
turns: SillyTavern's default preset puts World Info "before" right after the main prompt, so a
lorebook entry that drops out of the scan window (or comes in) leaves only the first few tokens
in common. llama.cpp then takes another slot, or hands this chat's slot to a second chat of the
same card (which shares the whole card as a prefix), and the turn is evaluated from scratch.

So the engine routes: each slot remembers the prompt last run in it (as a set of lines) and
the reply it generated. A request goes to the slot that holds *its own chat*: most of that
slot's prompt is in the new one (the card, the examples, the history) and so is the reply the
model gave there (random text: no other chat has it). Without that reply (a swipe or
regenerate, or a reply too short to tell) the prompt must also open with the same line and
hold the message that slot answered: a swipe is that slot's prompt again (the same last
message, no line it lacked); with no reply known, anywhere. Two chats of one card where the
user wrote the same line (``Hello! Who are you?``) share it, but not the reply: pinning one
to the other's slot would throw the other's cache away unsaved (llama.cpp saves a slot to its
RAM cache only when it picks the slot itself), and the two would then take turns in that one
slot, evaluating their histories again every turn (issue 40: 4 such chats on 2 slots
evaluated every prompt whole).

A request that continues no slot (a new chat, one that was away while others took its slot,
a task) is left to llama.cpp, loaded so that it then takes the least recently used free slot,
saving what that slot held to its RAM cache and restoring the best match for the new prompt
from there; the router predicts that slot and notes the request there. With every slot busy
it cannot be predicted, and the slots free when that request ends are forgotten.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Claim", "PromptPrint", "SlotRouter", "prompt_print"]

#: at least this share of a slot's prompt (in characters) must be in the new prompt for the
#: new one to continue that slot's chat (a lorebook entry or two may come and go)
SHARE = 0.5
#: lines shorter than this say too little to tell chats apart (``*nods*``, ``Wren:``)
MIN_ANCHOR = 12


@dataclass(frozen=True, slots=True)
class PromptPrint:
    """What the router knows of a prompt: its lines, and those that mark its chat's latest
    point (the last non-system message of a chat; the last lines of a text prompt)."""

    lines: frozenset[str]
    size: int
    tail: frozenset[str]
    #: the prompt's first line (the main prompt, or what a plugin put above it)
    head: str = ""
    #: its last line: a text prompt's reply goes on from it (``Wren:`` + the reply)
    last: str = ""


def _lines(text: str) -> list[str]:
    return [line for line in (raw.strip() for raw in text.splitlines()) if line]


def _print(texts: Sequence[str], tail: Iterable[str]) -> PromptPrint:
    ordered = [line for text in texts for line in _lines(text)]
    lines = frozenset(ordered)
    anchors = frozenset(line for line in tail if len(line) >= MIN_ANCHOR)
    size = sum(len(line) for line in lines)
    ends = (ordered[0], ordered[-1]) if ordered else ("", "")
    return PromptPrint(lines, size, anchors, *ends)


def prompt_print(kind: str, body: Mapping[str, Any]) -> PromptPrint:
    """The :class:`PromptPrint` of a llama.cpp request body (``kind`` ``chat`` or ``text``)."""
    if kind == "text":
        lines = _lines(str(body.get("prompt") or ""))
        # the very last line is usually the reply's opening ("Wren:"), the same in every chat
        return _print(lines, lines[-3:-1])
    messages = [m for m in body.get("messages") or () if isinstance(m, Mapping)]
    texts = [str(m.get("content") or "") for m in messages]
    spoken = [t for m, t in zip(messages, texts, strict=True) if m.get("role") != "system"]
    return _print(texts, _lines(spoken[-1]) if spoken else ())


@dataclass(frozen=True, slots=True)
class Claim:
    """Where one request runs: ``id_slot`` is sent to llama.cpp (-1: it chooses); ``slot`` is
    the slot the router knows it runs in (``None`` when llama.cpp chooses among several)."""

    slot: int | None
    id_slot: int


@dataclass(slots=True)
class _Slot:
    held: PromptPrint | None = None  # None: empty, or not known
    reply: frozenset[str] = frozenset()
    busy: int = 0
    used: int = 0  # when it was last released (0: never), as llama.cpp's ``t_last_used``


@dataclass
class SlotRouter:
    """Slot choice for one loaded model with ``slots`` slots (thread-safe). The model must be
    loaded with ``slot_prompt_similarity = 0``, so that llama.cpp, when it chooses, takes the
    least recently used free slot, which the router predicts."""

    slots: int
    _state: list[_Slot] = field(init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _clock: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        self._state = [_Slot() for _ in range(max(1, self.slots))]

    def claim(self, prompt: PromptPrint) -> Claim:
        """The slot for a request with ``prompt``; pair it with :meth:`release`."""
        with self._lock:
            own = self._own_slot(prompt)
            if own is not None:  # pinned: llama.cpp waits for it if it is busy
                self._state[own].busy += 1
                return Claim(own, own)
            free = [i for i, s in enumerate(self._state) if not s.busy]
            if not free:  # llama.cpp takes whichever frees first
                return Claim(None, -1)
            # llama.cpp's choice: the least recently used, the last of equals; choosing it
            # itself, it saves what that slot held to its RAM cache and restores the best
            # match for this prompt from there (a chat coming back after others)
            lru = min(free, key=lambda i: (self._state[i].used, -i))
            taken = self._state[lru]
            # from now on it holds another chat: its own chat's next turn must not wait for it
            taken.busy, taken.held, taken.reply = taken.busy + 1, None, frozenset()
            return Claim(lru, -1)

    def release(self, claim: Claim, prompt: PromptPrint | None, reply: str) -> None:
        """Note what the slot of ``claim`` holds now: ``prompt`` and the ``reply`` generated
        after it (partial when stopped); ``None``: not known (the request was refused)."""
        with self._lock:
            self._clock += 1
            if claim.slot is None:
                # it ran in a slot that was free when it began; which one is not known
                for slot in self._state:
                    if not slot.busy:
                        slot.held, slot.reply = None, frozenset()
                return
            slot = self._state[claim.slot]
            slot.busy -= 1
            slot.held, slot.used = prompt, self._clock
            # a text prompt's reply goes on from its last line: the next prompt has them joined
            kept = _lines(reply) + _lines(prompt.last + reply)[:1] if prompt is not None else []
            slot.reply = frozenset(line for line in kept if len(line) >= MIN_ANCHOR)

    def _own_slot(self, prompt: PromptPrint) -> int | None:
        best: tuple[int, int] | None = None
        chosen = None
        for index, slot in enumerate(self._state):
            held = slot.held
            if held is None or not held.size:
                continue
            if not _continues(slot, held, prompt):
                continue
            shared = sum(len(line) for line in held.lines & prompt.lines)
            if shared < SHARE * held.size:
                continue
            rank = (shared, slot.used)
            if best is None or rank > best:
                best, chosen = rank, index
        return chosen


def _continues(slot: _Slot, held: PromptPrint, prompt: PromptPrint) -> bool:
    """Whether ``prompt`` goes on from the chat ``slot`` holds (``held``, its last prompt):
    the reply generated there is in it, or, with no reply in it, it opens as ``held`` did and
    either it is ``held`` again (a swipe: the same last message, no line ``held`` lacks) or no
    reply is known and ``held``'s last message is in it."""
    if not slot.reply.isdisjoint(prompt.lines):
        return True
    if not held.tail or held.head != prompt.head:
        return False
    if slot.reply:  # a swipe: the same prompt again
        return held.tail == prompt.tail and prompt.lines <= held.lines
    return not held.tail.isdisjoint(prompt.lines)
