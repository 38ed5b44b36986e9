"""The group around a drafted speaker, as a prompt build reads it (:attr:`PromptState.group`).

A plain value among the models (not in :mod:`tavernkit.prompt.group`, the helpers that
evaluate member fields) so that :class:`~tavernkit.models.state.ChatState` and
:class:`~tavernkit.prompt.state.PromptState` can both carry it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tavernkit.models.character import Character

__all__ = ["GroupPromptContext", "PromptMember"]


@dataclass(frozen=True, slots=True)
class PromptMember:
    """One member as a prompt sees it: the character and whether it is muted."""

    character: Character
    muted: bool = False

    @property
    def name(self) -> str:
        return self.character.name


@dataclass(frozen=True, slots=True)
class GroupPromptContext:
    """The group around the drafted speaker (:attr:`PromptState.character`).

    ``members``: every member in list order, muted ones included; ``speaker``: the index of
    the drafted member in ``members``; ``join``: join the members' cards (generation modes 1
    and 2), ``join_muted`` keeps muted members' cards in (mode 2); ``join_prefix`` /
    ``join_suffix``: the text around each member's field (``<FIELDNAME>`` becomes the field's
    label); ``nudge``: the chat-completion group nudge template (``None``: the preset's).
    """

    members: tuple[PromptMember, ...]
    speaker: int
    join: bool = False
    join_muted: bool = False
    join_prefix: str = ""
    join_suffix: str = ""
    nudge: str | None = None

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.members]

    def joined_members(self) -> list[PromptMember]:
        """The members whose cards a join carries: muted ones only in mode 2 or when drafted."""
        return [
            m
            for i, m in enumerate(self.members)
            if self.join_muted or not m.muted or i == self.speaker
        ]

    def depth_members(self) -> list[PromptMember]:
        """The members whose depth prompts a join injects: muted ones only when drafted, in
        both join modes (SillyTavern's ``getGroupDepthPrompts``)."""
        return [m for i, m in enumerate(self.members) if not m.muted or i == self.speaker]
