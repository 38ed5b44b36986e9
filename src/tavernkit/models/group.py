"""A SillyTavern group (``data/<user>/groups/<id>.json``) and its members.

:class:`Group` is a :class:`~tavernkit.models.base.WireModel`: a group file read and written
back keeps its keys, their order and the keys SillyTavern's listing adds (``date_added``,
``chat_size``...). Members are character **avatar file names** (``Alice.png``), as in
SillyTavern; :class:`GroupMember` is one of them resolved against the roster of characters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Self

from pydantic import Field, ModelWrapValidatorHandler, model_validator

from tavernkit.models.base import Number, WireModel
from tavernkit.models.character import DEFAULT_TALKATIVENESS, Character

__all__ = [
    "DEFAULT_AUTO_MODE_DELAY",
    "ActivationStrategy",
    "GenerationMode",
    "Group",
    "GroupMember",
    "find_member",
    "resolve_members",
    "st_talkativeness",
]

#: Seconds between auto-mode ticks when the group file has none (``DEFAULT_AUTO_MODE_DELAY``).
DEFAULT_AUTO_MODE_DELAY = 5


class ActivationStrategy(IntEnum):
    """``group_activation_strategy``: who replies to a turn."""

    NATURAL = 0
    LIST = 1
    MANUAL = 2
    POOLED = 3


class GenerationMode(IntEnum):
    """``group_generation_mode``: whose card fields a member's prompt carries."""

    SWAP = 0  # only the drafted member's card
    APPEND = 1  # every member's card joined, muted members left out (unless drafted)
    APPEND_DISABLED = 2  # every member's card joined, muted members too


class Group(WireModel):
    """One group file. Numeric ``id``/``chat_id``/``chats`` entries become strings and a
    missing ``disabled_members`` becomes ``[]``, as SillyTavern's client normalises them."""

    id: str = ""
    name: str = "New Group"
    members: list[str] = Field(default_factory=list)
    avatar_url: str | None = None
    allow_self_responses: bool = False
    activation_strategy: int = ActivationStrategy.NATURAL
    generation_mode: int = GenerationMode.SWAP
    disabled_members: list[str] = Field(default_factory=list)
    fav: bool = False
    chat_id: str = ""
    chats: list[str] = Field(default_factory=list)
    auto_mode_delay: Number = DEFAULT_AUTO_MODE_DELAY
    generation_mode_join_prefix: str = ""
    generation_mode_join_suffix: str = ""

    @model_validator(mode="wrap")
    @classmethod
    def _normalise(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        if isinstance(data, Mapping):
            data = dict(data)
            for key in ("id", "chat_id"):
                if isinstance(data.get(key), int | float) and not isinstance(data[key], bool):
                    data[key] = _js_number_text(data[key])
            if isinstance(data.get("chats"), list):
                data["chats"] = [
                    _js_number_text(c) if isinstance(c, int | float) else c for c in data["chats"]
                ]
            if data.get("disabled_members") is None and "disabled_members" in data:
                data["disabled_members"] = []
        return handler(data)

    @property
    def strategy(self) -> ActivationStrategy | None:
        """The activation strategy, or ``None`` for a value SillyTavern does not know (such a
        group activates nobody)."""
        try:
            return ActivationStrategy(int(self.activation_strategy))
        except ValueError:
            return None

    @property
    def mode(self) -> GenerationMode:
        """The generation mode; a missing or unknown value swaps cards, as SillyTavern does."""
        try:
            return GenerationMode(int(self.generation_mode))
        except ValueError:
            return GenerationMode.SWAP

    @property
    def joins_cards(self) -> bool:
        return self.mode in (GenerationMode.APPEND, GenerationMode.APPEND_DISABLED)

    def enabled_members(self) -> list[str]:
        """``members`` minus ``disabled_members`` (muted), in list order."""
        muted = set(self.disabled_members)
        return [m for m in self.members if m not in muted]

    def is_muted(self, avatar: str) -> bool:
        return avatar in self.disabled_members


def _js_number_text(value: float) -> str:
    """``String(n)`` for an id written as a JSON number."""
    if isinstance(value, float) and value.is_integer() and math.isfinite(value):
        return str(int(value))
    return str(value)


def st_talkativeness(character: Character) -> float:
    """The talkativeness SillyTavern's group wrapper uses (``data.extensions.talkativeness``).

    A missing value is the card loader's 0.5; a value JS's ``isNaN`` rejects (text that is not
    a number) is 0.5; ``null``, ``''`` and ``false`` become 0 (``Number(x)``), as in 1.18.
    """
    extensions = character.extensions
    if "talkativeness" not in extensions:
        return DEFAULT_TALKATIVENESS
    raw = extensions["talkativeness"]
    if raw is None or raw is False or (isinstance(raw, str) and not raw.strip()):
        return 0.0
    if raw is True:
        return 1.0
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return DEFAULT_TALKATIVENESS
    return DEFAULT_TALKATIVENESS if math.isnan(value) else value


@dataclass(frozen=True, slots=True)
class GroupMember:
    """A member resolved against the roster: its avatar file name (the member's identity in the
    group file and in ``original_avatar``), the character and whether it is muted."""

    avatar: str
    character: Character
    muted: bool = False

    @property
    def name(self) -> str:
        return self.character.name

    @property
    def talkativeness(self) -> float:
        return st_talkativeness(self.character)


def resolve_members(group: Group, roster: Mapping[str, Character]) -> list[GroupMember]:
    """The group's members that exist in ``roster`` (avatar file name -> character), in list
    order; duplicates are kept (SillyTavern keeps them too) and unknown avatars dropped."""
    muted = set(group.disabled_members)
    return [
        GroupMember(avatar, roster[avatar], avatar in muted)
        for avatar in group.members
        if avatar in roster
    ]


def find_member(members: Sequence[GroupMember], ref: str) -> GroupMember | None:
    """The member ``ref`` names, as ``/trigger`` finds one (``findGroupMemberId``): a number is
    an index into the member list; otherwise the member whose name or avatar file is ``ref``
    (case-insensitive), else the one whose name starts with it, else the one whose name holds
    it (SillyTavern searches fuzzily; an ambiguous prefix or part finds nobody)."""
    wanted = ref.strip()
    if wanted.isdigit():
        index = int(wanted)
        return members[index] if index < len(members) else None
    folded = wanted.casefold()
    if not folded:
        return None
    for member in members:
        if folded in (member.name.casefold(), member.avatar.casefold()):
            return member
    for test in (str.startswith, str.__contains__):
        found = {m.avatar: m for m in members if test(m.name.casefold(), folded)}
        if len(found) == 1:
            return next(iter(found.values()))
        if found:
            return None
    return None
