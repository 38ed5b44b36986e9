"""The chat verb a server turn runs (:func:`run_verb`: a solo chat's send, swipe, regenerate,
continue or impersonate, or a group chat's turn), and the check of a branch point
(:func:`check_branch_point`) made before a turn starts."""

from __future__ import annotations

from typing import Any

from tavernkit.chat.group_turn import GroupTurnOutcome, group_for_chat
from tavernkit.chat.reply import TurnOutcome
from tavernkit.chat.service import ChatService
from tavernkit.errors import FormatError
from tavernkit.generation.abort import AbortController
from tavernkit.server.turn_events import EventLogSink, MemberSink
from tavernkit.server.turn_request import TurnRequest
from tavernkit.store.chat_types import ChatInfo

__all__ = ["check_branch_point", "run_verb"]


async def run_verb(
    chats: ChatService,
    info: ChatInfo,
    request: TurnRequest,
    sink: EventLogSink,
    controller: AbortController,
) -> TurnOutcome | GroupTurnOutcome:
    chat_id = info.id
    if request.group:
        return await _run_group_verb(chats, chat_id, request, sink, controller)
    common: dict[str, Any] = {
        "sink": sink,
        "abort": controller.signal,
        "overrides": request.overrides,
        "interrupt": request.interrupt,
        "checked": info,  # TurnHub.start read it and checked the overrides
    }
    kind = request.kind
    if kind == "send":
        return await chats.send(
            chat_id,
            request.text,
            attachments=list(request.attachments),
            prefill=request.prefill,
            at=request.at,
            **common,
        )
    if kind == "swipe":
        return await chats.swipe(chat_id, prefill=request.prefill, **common)
    if kind == "regenerate":
        return await chats.regenerate(chat_id, prefill=request.prefill, at=request.at, **common)
    if kind == "continue":
        return await chats.continue_(chat_id, **common)
    return await chats.impersonate(chat_id, **common)


async def check_branch_point(
    chats: ChatService, chat_id: str, count: int, request: TurnRequest
) -> None:
    """Refuse an ``at`` the turn cannot branch at (422 naming ``at``), before anything
    starts: only a ``send`` or ``regenerate`` (a solo chat's or a group's; not an auto-mode
    tick) branches, at a message after the first, and a regenerate at a reply (the chat's
    tree: :meth:`ChatService.fork`)."""
    at = request.at
    if request.kind not in ("send", "regenerate") or request.auto:
        raise FormatError("only a send or a regenerate starts a branch", field="at")
    if at is None or not 1 <= at < count:
        raise FormatError(
            f"a branch starts at a message from 1 to {count - 1}, not {at}", field="at"
        )
    if request.kind == "regenerate":
        rows = await chats.store.load_message_range(
            chat_id, start=at, stop=at + 1, owner=chats.owner
        )
        if rows and rows[0].data.get("is_user"):
            raise FormatError(f"message {at} is the user's; regenerate a reply", field="at")


#: a group turn's verb -> :meth:`ChatService.group_turn`'s kind
_GROUP_KIND = {"send": "normal", "trigger": "normal"}


async def _run_group_verb(
    chats: ChatService,
    chat_id: str,
    request: TurnRequest,
    sink: EventLogSink,
    controller: AbortController,
) -> GroupTurnOutcome:
    info = await chats.store.get_chat_info(chat_id, owner=chats.owner)
    loaded = await group_for_chat(chats.store, info.name, owner=chats.owner)
    avatars = {m.name: m.avatar for m in loaded.members}

    def member_sink(name: str) -> MemberSink:
        member = MemberSink(sink.log, sink.turn_id, name, avatars.get(name, ""), sink.writer)
        member.timer = sink.timer
        return member

    return await chats.group_turn(
        chat_id,
        _GROUP_KIND.get(request.kind, request.kind),
        text=request.text if request.kind == "send" else "",
        member=request.member,
        auto=request.auto,
        member_sink=member_sink,
        abort=controller.signal,
        overrides=request.overrides,
        interrupt=request.interrupt,
        at=request.at,
    )
