"""Replay one recorded SillyTavern group turn: choose the speakers as the group wrapper does,
then build each speaker's request with the prompt builders.

The input is a group case of the conformance folder (``inputs`` + ``effective_settings``,
README §5). Used by the conformance suite; handy for checking an exported SillyTavern group
state against tavernkit.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tavernkit.groups.prompt import group_prompt_context
from tavernkit.groups.rng import Mulberry32
from tavernkit.groups.selection import SelectionRequest, select_speakers
from tavernkit.models.character import Character
from tavernkit.models.chat import Message
from tavernkit.models.group import Group, GroupMember, find_member, resolve_members
from tavernkit.prompt.assembled import AssembledChat, AssembledText
from tavernkit.prompt.st_replay import prepare_replay

__all__ = ["GroupReplayTurn", "member_generation_kind", "replay_group_turn"]

_TRIGGER = re.compile(r"^/trigger(?:\s+await=\S+)?\s+(?P<name>.+)$")


@dataclass(frozen=True, slots=True)
class GroupReplayTurn:
    """One speaker's request of the turn: who was drafted and the prompt built for it."""

    member: GroupMember
    prompt: AssembledChat | AssembledText


def member_generation_kind(kind: str) -> str:
    """The type each drafted member generates with: swipe, impersonate, quiet and continue
    keep theirs; everything else (auto, regenerate) is a normal generation."""
    return kind if kind in ("swipe", "impersonate", "quiet", "continue") else "normal"


def _forced_name(generate: Mapping[str, Any]) -> str | None:
    name = generate.get("force_ch_id_name")
    if isinstance(name, str) and name:
        return name
    match = _TRIGGER.match(str(generate.get("via") or ""))
    return match.group("name").strip() if match else None


def replay_group_turn(
    inputs: Mapping[str, Any],
    effective: Mapping[str, Any] | None = None,
    *,
    seed: int | None = None,
    replies: Callable[[int, GroupMember], str] = lambda i, m: "Fixed oracle reply.",
    compat: str = "st-1.18",
    engine: Callable[..., Any] | None = None,
    scan: Callable[..., Any] | None = None,
) -> list[GroupReplayTurn]:
    """Every request of one recorded group turn, in order.

    ``seed`` seeds mulberry32 for the selection (the recording's ``random_seed``); ``replies``
    gives the text of the ``i``-th reply, which the next speakers see in their chat.
    """
    effective = dict(effective or {})
    group_in = dict(inputs["group"])
    group = Group.model_validate(effective.get("group") or group_in)
    cards = {str(c["avatar"]): c for c in group_in.get("cards") or []}
    roster = {
        avatar: Character.model_validate(card.get("data") or card) for avatar, card in cards.items()
    }
    members = resolve_members(group, roster)
    chat_raw: list[dict[str, Any]] = [dict(m) for m in inputs.get("chat") or []]
    chat = [Message.model_validate(m) for m in chat_raw]
    generate = dict(inputs.get("generate") or {})
    kind = str(generate.get("type") or "normal")
    forced = _forced_name(generate)
    found = find_member(members, forced) if forced else None
    force = found.avatar if found is not None else None
    user_input = str(inputs.get("user_input") or "")
    request = SelectionRequest(
        group=group, members=members, chat=chat, user_input=user_input, kind=kind, force=force
    )
    rng = Mulberry32(seed if seed is not None else 1)
    speakers = select_speakers(request, rng)

    persona = inputs.get("persona") or {}
    user_name = str(effective.get("name1") or persona.get("name") or "User")
    turns: list[GroupReplayTurn] = []
    for i, member in enumerate(speakers):
        if i == 0 and user_input and kind not in ("impersonate", "quiet", "continue", "swipe"):
            chat_raw.append(
                {
                    "name": user_name,
                    "is_user": True,
                    "is_system": False,
                    "mes": user_input,
                    "extra": {},
                }
            )
        member_inputs = _member_inputs(inputs, cards[member.avatar], member, chat_raw)
        replay = prepare_replay(member_inputs, effective, compat=compat)
        replay.state = replay.state.replace(
            group=group_prompt_context(group, members, member, nudge=None)
        )
        prompt = replay.run(
            kind=member_generation_kind(kind),
            quiet_prompt=str(generate.get("quiet_prompt") or ""),
            engine=engine,
            scan=scan,
        )
        turns.append(GroupReplayTurn(member, prompt))
        chat_raw.append(
            {
                "name": member.name,
                "is_user": False,
                "is_system": False,
                "mes": replies(i, member),
                "extra": {},
                "original_avatar": member.avatar,
            }
        )
    return turns


def _member_inputs(
    inputs: Mapping[str, Any],
    card: Mapping[str, Any],
    member: GroupMember,
    chat_raw: list[dict[str, Any]],
) -> dict[str, Any]:
    """The recorded inputs as one member's generation sees them: its card, the chat so far,
    the books (other members' character books left out)."""
    member_inputs = dict(inputs)
    member_inputs["card"] = card
    member_inputs["card_avatar"] = member.avatar
    member_inputs["chat"] = copy.deepcopy(chat_raw)
    member_inputs["books"] = [
        b
        for b in inputs.get("books") or []
        if b.get("scope") != "character" or b.get("owner") == member.name
    ]
    return member_inputs


def recorded_replies(case: Mapping[str, Any]) -> Sequence[str]:
    """The reply texts a recording's chat gained, in order (what later speakers saw)."""
    before = len(case["inputs"].get("chat") or [])
    after = case.get("chat_after") or []
    return [str(m.get("mes") or "") for m in after[before:] if not m.get("is_user")]
