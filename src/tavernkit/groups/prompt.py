"""From a group and its drafted member to the prompt builders' :class:`GroupPromptContext`."""

from __future__ import annotations

from collections.abc import Sequence

from tavernkit.models.group import GenerationMode, Group, GroupMember
from tavernkit.models.group_context import GroupPromptContext, PromptMember

__all__ = ["group_prompt_context"]


def group_prompt_context(
    group: Group,
    members: Sequence[GroupMember],
    speaker: GroupMember,
    *,
    nudge: str | None = None,
) -> GroupPromptContext:
    """The context of ``speaker``'s request: every resolved member (list order, muted
    included), the join settings of the group's generation mode, and the nudge template
    (``None``: the chat-completion preset's ``group_nudge_prompt``)."""
    index = next((i for i, m in enumerate(members) if m.avatar == speaker.avatar), -1)
    mode = group.mode
    return GroupPromptContext(
        members=tuple(PromptMember(m.character, m.muted) for m in members),
        speaker=index,
        join=group.joins_cards,
        join_muted=mode == GenerationMode.APPEND_DISABLED,
        join_prefix=group.generation_mode_join_prefix,
        join_suffix=group.generation_mode_join_suffix,
        nudge=nudge,
    )
