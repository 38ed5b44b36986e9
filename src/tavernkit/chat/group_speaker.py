"""The drafted member of a group turn, as one member's generation needs it."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from tavernkit.models.chat import Message
from tavernkit.models.group_context import GroupPromptContext

__all__ = ["GroupSpeaker", "mark_group_reply", "set_group_avatar"]


@dataclass(frozen=True, slots=True)
class GroupSpeaker:
    """One member's generation in a group turn: its stored character (``character_id``), its
    avatar file (the reply's ``original_avatar``), the prompt context and the other members'
    names (a reply that starts speaking as one of them is cut there)."""

    character_id: str
    avatar: str
    context: GroupPromptContext
    others: tuple[str, ...] = ()
    #: the batch the reply belongs to (``extra.gen_id``): a group regeneration replaces the
    #: replies of the last batch
    batch: int | None = None

    @property
    def name(self) -> str:
        return self.context.members[self.context.speaker].name


def mark_group_reply(message: Message, speaker: GroupSpeaker) -> None:
    """Mark ``message`` as ``speaker``'s, as SillyTavern's ``saveReply`` does in a group:
    ``original_avatar`` (the speaker's identity), the thumbnail ``force_avatar`` and the
    batch id in ``extra.gen_id``."""
    set_group_avatar(message, speaker.avatar)
    if speaker.batch is not None:
        message.extra.gen_id = speaker.batch


def set_group_avatar(message: Message, avatar: str) -> None:
    """``original_avatar`` and ``force_avatar`` of a group member's message."""
    message.original_avatar = avatar
    message.force_avatar = (
        "img/ai4.png" if avatar == "none" else f"/thumbnail?type=avatar&file={quote(avatar)}"
    )
