"""``generate_quiet_prompt`` in a group chat: whose view the quiet generation takes.

SillyTavern's group wrapper gives a quiet generation the member ``force_chid`` names, else the
last character speaker of the chat, else the first member (muted or not). ``force_ch_id`` here
is an index into the group's member list (list order) or a member's name or avatar file:
tavernkit has no global character array for SillyTavern's ``characters[]`` index to point
into. ``skipWIAN``, ``quietToLoud`` and ``quietName`` do nothing in a group, as in 1.18.
"""

from __future__ import annotations

import random

from tavernkit.chat.group_turn import speaker_for
from tavernkit.errors import GenerateTaskError
from tavernkit.groups.records import LoadedGroup, group_of_chat
from tavernkit.groups.selection import SelectionRequest, select_speakers
from tavernkit.models.chat import Message
from tavernkit.models.group import GroupMember
from tavernkit.models.state import ChatState
from tavernkit.store.chat_state import load_chat_state
from tavernkit.store.protocol import Store

__all__ = ["QUIET_WINDOW", "group_quiet_state", "is_group_chat"]

#: The newest messages read to find the last speaker (a quiet turn reads no further back).
QUIET_WINDOW = 64


async def is_group_chat(store: Store, chat_id: str | None, *, owner: str) -> bool:
    if chat_id is None:
        return False
    info = await store.get_chat_info(chat_id, owner=owner)
    return await group_of_chat(store, info.name, owner=owner) is not None


def _forced(loaded: LoadedGroup, force: int | str) -> GroupMember:
    if isinstance(force, int) and not isinstance(force, bool):
        if not 0 <= force < len(loaded.members):
            raise GenerateTaskError(
                "invalid_input",
                f"force_ch_id {force} is not a member index of group {loaded.group.name!r} "
                f"(0 to {len(loaded.members) - 1})",
                details={"field": "force_ch_id", "value": force},
            )
        return loaded.members[force]
    return loaded.member(str(force))


async def group_quiet_state(
    store: Store, chat_id: str | None, force: int | str | None, *, owner: str
) -> ChatState | None:
    """The state of a quiet generation in the chat's group, as the drafted member sees it;
    ``None`` for a solo chat (where ``force`` is an ``invalid_input`` error)."""
    if chat_id is None:
        loaded = None
    else:
        info = await store.get_chat_info(chat_id, owner=owner)
        loaded = await group_of_chat(store, info.name, owner=owner)
    if loaded is None:
        if force is not None:
            raise GenerateTaskError(
                "invalid_input",
                "force_ch_id names a group member, and this chat is not a group chat",
                details={"field": "force_ch_id"},
            )
        return None
    if not loaded.members:
        raise GenerateTaskError(
            "invalid_input",
            f"group {loaded.group.name!r} has no members",
            details={"field": "force_ch_id"},
        )
    if force is not None:
        member = _forced(loaded, force)
    else:
        assert chat_id is not None
        window = await store.load_chat_window(chat_id, last=QUIET_WINDOW, owner=owner)
        chat = [Message.model_validate(m.data) for m in window.tail]
        request = SelectionRequest(
            group=loaded.group, members=loaded.members, chat=chat, kind="quiet"
        )
        (member,) = select_speakers(request, random.random)
    state = await load_chat_state(
        store, owner=owner, chat_id=chat_id, character=loaded.character_ids[member.avatar]
    )
    return state.model_copy(update={"group": speaker_for(loaded, member).context})
