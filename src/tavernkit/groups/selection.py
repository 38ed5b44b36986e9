"""Who replies to a group turn: SillyTavern 1.18's ``generateGroupWrapper`` selection.

The strategies (natural, list, manual, pooled) and the special generation types (quiet,
swipe/continue, impersonate, a forced member) follow group-chats.js exactly, random draws
included: every draw comes from the injected ``rng`` (a ``() -> float`` in ``[0, 1)``) in the
order SillyTavern draws, so :class:`~tavernkit.groups.rng.Mulberry32` seeded like a recording
reproduces that recording's speakers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from tavernkit.models.chat import Message
from tavernkit.models.group import ActivationStrategy, Group, GroupMember

__all__ = ["Rng", "SelectionRequest", "extract_words", "select_speakers", "shuffle"]

#: A source of floats in ``[0, 1)`` (``Math.random``).
Rng = Callable[[], float]

_T = TypeVar("_T")

# ``extractAllWords``: ``\b\w+\b`` in JavaScript's ASCII sense.
_WORD = re.compile(r"\b\w+\b", re.ASCII)


def extract_words(text: str) -> list[str]:
    """Every ASCII word of ``text``, lowercased (``"Zoë"`` gives ``zo``)."""
    return [w.lower() for w in _WORD.findall(text)]


def shuffle(items: Sequence[_T], rng: Rng) -> list[_T]:
    """SillyTavern's ``shuffle``: Fisher-Yates from the end, one draw per item."""
    out = list(items)
    k = len(out)
    while k:
        j = int(rng() * k)
        k -= 1
        out[k], out[j] = out[j], out[k]
    return out


@dataclass(frozen=True, slots=True)
class SelectionRequest:
    """One group turn as the wrapper sees it.

    ``members``: the group's members resolved against the roster, list order, muted ones
    included; ``chat``: the messages before the user's new one; ``user_input``: the text typed
    (empty for an empty box); ``kind``: the generation type; ``force``: the avatar of a member
    asked for by name (``/trigger``, ``force_chid``), which replies whatever the strategy and
    mute state; ``auto``: an auto-mode tick (typed text then does not count as input).
    """

    group: Group
    members: Sequence[GroupMember]
    chat: Sequence[Message]
    user_input: str = ""
    kind: str = "normal"
    force: str | None = None
    auto: bool = False

    @property
    def is_user_input(self) -> bool:
        return bool(self.user_input) and not self.auto

    @property
    def last_message(self) -> Message | None:
        return self.chat[-1] if self.chat else None

    @property
    def activation_text(self) -> str:
        if self.is_user_input:
            return self.user_input
        last = self.last_message
        return last.text if last is not None and not last.is_system else ""

    def enabled(self) -> list[GroupMember]:
        return [m for m in self.members if not m.muted]


def select_speakers(request: SelectionRequest, rng: Rng) -> list[GroupMember]:
    """The members that reply, in reply order (possibly none: the turn then only posts the
    user's message). The first rule that applies wins, as in SillyTavern:

    a forced member; ``quiet`` (the last speaker, else the first member); ``swipe`` and
    ``continue`` (the last speaker); ``impersonate`` (any member at random, muted included);
    then the group's strategy.
    """
    members = request.members
    by_avatar = {m.avatar: m for m in members}
    if request.force is not None:
        forced = by_avatar.get(request.force)
        return [forced] if forced is not None else []
    if request.kind == "quiet":
        found = _swipe_targets(request, rng, allow_system=True)
        return found[:1] if found else list(members[:1])
    if request.kind in ("swipe", "continue"):
        return _swipe_targets(request, rng, allow_system=False)
    if request.kind == "impersonate":
        return [members[int(rng() * len(members))]] if members else []
    strategy = request.group.strategy
    if strategy == ActivationStrategy.NATURAL:
        chosen = _natural(request, rng)
    elif strategy == ActivationStrategy.LIST:
        chosen = request.enabled()
    elif strategy == ActivationStrategy.POOLED:
        chosen = _pooled(request, rng)
    elif strategy == ActivationStrategy.MANUAL and not request.is_user_input:
        chosen = shuffle(request.enabled(), rng)[:1]
    else:
        chosen = []
    return _unique(chosen)


def _unique(members: Sequence[GroupMember]) -> list[GroupMember]:
    seen: set[str] = set()
    out: list[GroupMember] = []
    for m in members:
        if m.avatar not in seen:
            seen.add(m.avatar)
            out.append(m)
    return out


def _natural(request: SelectionRequest, rng: Rng) -> list[GroupMember]:
    """``activateNaturalOrder``: mentions, then talkativeness rolls, then a random pick."""
    enabled = request.enabled()
    last = request.last_message
    banned = (
        last.name
        if not request.is_user_input
        and last is not None
        and not last.is_user
        and not request.group.allow_self_responses
        else None
    )
    activated: list[GroupMember] = []
    member_words = [(m, extract_words(m.name)) for m in enabled]
    for word in extract_words(request.activation_text):
        for member, words in member_words:
            if member.name == banned:
                continue
            if word in words:
                activated.append(member)
                break
    chatty: list[GroupMember] = []
    for member in shuffle(enabled, rng):
        if member.name == banned:
            continue
        roll = rng()
        talkativeness = member.talkativeness
        if talkativeness >= roll:
            activated.append(member)
        if talkativeness > 0:
            chatty.append(member)
    pool = chatty or enabled
    tries = 0
    while not activated and tries < len(pool):
        tries += 1
        activated.append(pool[int(rng() * len(pool))])
    return activated


def _pooled(request: SelectionRequest, rng: Rng) -> list[GroupMember]:
    """``activatePooledOrder``: one member who has not spoken since the user last did."""
    enabled = request.enabled()
    if not enabled:
        return []
    spoken: set[str] = set()
    if not request.is_user_input:
        for message in reversed(request.chat):
            if message.is_user:
                break
            if message.is_system or message.extra.type == "narrator":
                continue
            if message.original_avatar:
                spoken.add(message.original_avatar)
    pool = [m for m in enabled if m.avatar not in spoken]
    if not pool:
        last = request.last_message
        if (
            len(enabled) > 1
            and last is not None
            and not last.is_user
            and not last.is_system
            and last.original_avatar
        ):
            pool = [m for m in enabled if m.avatar != last.original_avatar]
        else:
            pool = enabled
    return [pool[int(rng() * len(pool))]]


def _skipped(message: Message, *, allow_system: bool) -> bool:
    return (
        message.is_user
        or (message.is_system and not allow_system)
        or message.extra.type == "narrator"
    )


def _swipe_targets(request: SelectionRequest, rng: Rng, *, allow_system: bool) -> list[GroupMember]:
    """``activateSwipe``: the last non-user speaker (membership is not checked in SillyTavern;
    here a speaker must still be a member to have a card)."""
    members = request.members
    by_avatar = {m.avatar: m for m in members}
    chat = request.chat
    last = request.last_message
    found: list[GroupMember] = []
    if last is None:
        return found
    if _skipped(last, allow_system=allow_system):
        speaker = next(
            (
                m.original_avatar
                for m in reversed(chat)
                if not _skipped(m, allow_system=allow_system) and m.original_avatar
            ),
            None,
        )
        if speaker is not None and speaker in by_avatar:
            found.append(by_avatar[speaker])
        elif speaker is None and members:
            found.append(members[int(rng() * len(members))])
    if last.original_avatar:
        if last.original_avatar in by_avatar:
            found.append(by_avatar[last.original_avatar])
    else:
        named = next((m for m in members if m.name == last.name), None)
        if named is not None:
            found.append(named)
    return _unique(found)
