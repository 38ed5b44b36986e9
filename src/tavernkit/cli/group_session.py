"""The group side of a ``tavernkit chat --group NAME`` session: opening the group's chat and
running its turns, each member's reply printed under that member's name.

A plain input line, ``/regen``, ``/continue``, ``/swipe`` and ``/impersonate`` become group
turns (:meth:`~tavernkit.chat.service.ChatService.group_turn`); ``/trigger NAME`` makes one
member reply (:meth:`~tavernkit.chat.service.ChatService.trigger`).
"""

from __future__ import annotations

from typing import Any

from tavernkit.chat.group_turn import GroupTurnOutcome
from tavernkit.chat.service import ChatService
from tavernkit.cli.chat_display import ChatConsoleSink, JsonSink, out, report_outcome
from tavernkit.cli.failures import Where
from tavernkit.cli.language import say
from tavernkit.errors import NotFound
from tavernkit.generation.sink import ResponseSink
from tavernkit.groups.records import group_of_chat, load_group

__all__ = ["group_name_of_chat", "open_group_chat", "run_group_turn"]


async def open_group_chat(
    chats: ChatService, group: str, *, chat: str | None, new: bool
) -> tuple[str, bool]:
    """The chat id of the group's session and whether it was just created: ``chat`` when
    given (it must be one of the group's), else the group's open chat, else a new one."""
    loaded = await load_group(chats.store, group, owner=chats.owner)
    wanted = chat if chat is not None else (None if new else loaded.group.chat_id or None)
    if wanted is not None:
        info = await chats.store.get_chat_info(wanted, owner=chats.owner)
        if chat is not None and info.name not in loaded.group.chats:
            raise NotFound(f"chat {chat!r} is not a chat of group {loaded.group.name!r}")
        return info.id, False
    return (await chats.new_group_chat(loaded.id)).id, True


async def group_name_of_chat(chats: ChatService, chat_id: str) -> str | None:
    """The name of the group whose chat this is, or ``None`` for a solo chat."""
    info = await chats.store.get_chat_info(chat_id, owner=chats.owner)
    if info.character_id is not None:
        return None
    loaded = await group_of_chat(chats.store, info.name, owner=chats.owner)
    return loaded.group.name if loaded is not None else None


async def run_group_turn(
    chats: ChatService,
    chat_id: str,
    kind: str,
    *,
    as_json: bool,
    overrides: dict[str, Any],
    text: str = "",
    member: str | None = None,
) -> GroupTurnOutcome:
    """One group turn in the terminal: a spinner, then each member's reply as it streams
    under its name (``--json``: one event stream, a ``done`` line per reply)."""
    await chats.check_overrides(overrides or None)
    json_sink = JsonSink(out) if as_json else None
    consoles: list[ChatConsoleSink] = []

    def sink_for(name: str) -> ResponseSink:
        if json_sink is not None:
            return json_sink
        status = out.status(say("{name} is thinking…", name=name), spinner="dots")
        status.start()
        sink = ChatConsoleSink(out, status, name)
        consoles.append(sink)
        return sink

    try:
        outcome = await chats.group_turn(
            chat_id,
            kind,
            text=text,
            member=member,
            member_sink=sink_for,
            overrides=overrides or None,
        )
    finally:
        for sink in consoles:
            sink.stop_status(header=False)
    for index, reply in enumerate(outcome.replies):
        if json_sink is not None:
            json_sink.line(
                {
                    "event": "done",
                    "kind": reply.outcome.kind,
                    "status": reply.outcome.status,
                    "chat_id": chat_id,
                    "member": reply.name,
                    "message_index": reply.outcome.message_index,
                    "text": reply.outcome.text,
                }
            )
        console = consoles[index] if index < len(consoles) else None
        report_outcome(reply.outcome, console, Where())
    if not outcome.replies and json_sink is None:
        out.print(
            f"[dim]{say('(nobody replies: the message is posted; /trigger NAME asks a member)')}[/]"
        )
    return outcome
