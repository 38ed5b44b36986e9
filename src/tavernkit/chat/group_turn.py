"""A turn of a group chat: choose the members who reply, then run one generation per member.

This is SillyTavern 1.18's ``generateGroupWrapper`` over tavernkit's chat turns
(:class:`~tavernkit.chat.service.ChatService` runs each member's generation):

1. the group of the chat is loaded and its members resolved to stored characters;
2. the speakers are chosen from the chat as it stands, before the user's new message
   (:func:`~tavernkit.groups.selection.select_speakers`: the strategy, or the forced member,
   or the special types' rules), drawing from the injected ``rng``;
3. the user's message (if any) is stored, then every speaker generates in order with its own
   card, books and depth prompt and the group around it; each sees the replies before it.
   A reply that fails or is stopped ends the batch there.

Nobody activated (manual strategy with typed input, every member muted) stores the user's
message and generates nothing. SillyTavern also posts an *empty* user message when the box
was empty; tavernkit posts nothing then (an empty message only clutters the chat).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tavernkit.chat.greetings import chat_name, iso_timestamp
from tavernkit.chat.group_speaker import GroupSpeaker, set_group_avatar
from tavernkit.chat.reply import TurnOutcome
from tavernkit.chat.slots import ChatSlots
from tavernkit.errors import Conflict, FormatError, NotFound
from tavernkit.generation.abort import AbortController
from tavernkit.groups.prompt import group_prompt_context
from tavernkit.groups.records import LoadedGroup, attach_chat, group_of_chat, load_group
from tavernkit.groups.selection import Rng, SelectionRequest, select_speakers
from tavernkit.models.chat import ChatHeader, ChatMetadata, Message
from tavernkit.models.group import GroupMember
from tavernkit.prompt.from_chat_state import prompt_state_from_chat_state, state_substitute
from tavernkit.store.chat_state import load_chat_state
from tavernkit.store.chat_types import ChatInfo
from tavernkit.store.protocol import Store

__all__ = [
    "GroupReply",
    "GroupTurnDraft",
    "GroupTurnOutcome",
    "create_group_chat",
    "group_for_chat",
    "mark_greeting",
    "pick_greeting",
    "preview_speaker",
    "refuse_group_chat",
    "reply_writer",
    "run_group_turn",
    "speaker_for",
]

#: How many of the newest messages the selection reads first; older ones are read only when
#: the strategy must look further back (pooled: to the last user message).
_SELECTION_WINDOW = 64

#: One member's generation: (chat id, generation kind, speaker, the batch's abort controller).
MemberGeneration = Callable[[str, str, GroupSpeaker, AbortController], Awaitable[TurnOutcome]]


@dataclass(frozen=True, slots=True)
class GroupReply:
    """One member's part of a group turn."""

    name: str
    avatar: str
    outcome: TurnOutcome


@dataclass(frozen=True, slots=True)
class GroupTurnOutcome:
    """What a group turn left: each drafted member's outcome, in reply order (empty when
    nobody was activated), and whether the user's message was stored."""

    kind: str
    replies: list[GroupReply] = field(default_factory=list)
    user_message_stored: bool = False

    @property
    def status(self) -> str:
        """``completed`` when every reply completed (or none was due), else the first
        reply's status that was not (``failed`` or ``aborted``)."""
        for reply in self.replies:
            if reply.outcome.status != "completed":
                return reply.outcome.status
        return "completed"

    @property
    def text(self) -> str:
        """The last reply's text (the quiet or impersonated text of such a turn)."""
        return self.replies[-1].outcome.text if self.replies else ""


async def group_for_chat(store: Store, chat_name: str, *, owner: str) -> LoadedGroup:
    """The group the chat belongs to; :class:`~tavernkit.errors.NotFound` for a solo chat."""
    loaded = await group_of_chat(store, chat_name, owner=owner)
    if loaded is None:
        raise NotFound(f"chat {chat_name!r} belongs to no group")
    return loaded


async def refuse_group_chat(store: Store, chat_name: str, *, owner: str) -> None:
    """A :class:`~tavernkit.errors.Conflict` when the chat is a group's: a solo turn there
    would speak as whichever character is selected."""
    loaded = await group_of_chat(store, chat_name, owner=owner)
    if loaded is not None:
        raise Conflict(
            f"chat {chat_name!r} is group {loaded.group.name!r}'s: use group_turn or trigger"
        )


async def preview_speaker(
    store: Store, chat_id: str, member: str | None, *, owner: str
) -> GroupSpeaker | None:
    """Whose turn a preview of a group chat shows: ``member``, else the first unmuted member
    (the list strategy's first speaker; the other strategies draw, which a preview must not).
    ``None`` for a solo chat, where naming a ``member`` is a
    :class:`~tavernkit.errors.NotFound`."""
    info = await store.get_chat_info(chat_id, owner=owner)
    loaded = None
    if info.character_id is None:
        loaded = await group_of_chat(store, info.name, owner=owner)
    if loaded is None:
        if member is not None:
            raise NotFound(f"chat {info.name!r} is not a group chat: it has no member {member!r}")
        return None
    if member is not None:
        return speaker_for(loaded, loaded.member(member))
    enabled = [m for m in loaded.members if not m.muted] or loaded.members
    if not enabled:
        raise Conflict(f"group {loaded.group.name!r} has no members to reply")
    return speaker_for(loaded, enabled[0])


def speaker_for(
    loaded: LoadedGroup, member: GroupMember, *, batch: int | None = None
) -> GroupSpeaker:
    """The generation of ``member`` within its group."""
    context = group_prompt_context(loaded.group, loaded.members, member)
    others = tuple(dict.fromkeys(m.name for m in loaded.members if m.name != member.name))
    return GroupSpeaker(
        character_id=loaded.character_ids[member.avatar],
        avatar=member.avatar,
        context=context,
        others=others,
        batch=batch,
    )


async def _selection_chat(
    store: Store, chat_id: str, *, owner: str, stop: int | None = None
) -> list[Message]:
    """The newest messages (before message ``stop``, when given: a turn on a new branch
    from there) back to the last user message (or the whole chat when there is none): the
    window grows 8x while the members talked among themselves past it, so a long auto-mode
    stretch costs what it holds, not the whole chat."""
    size = _SELECTION_WINDOW
    while True:
        if stop is None:
            window = await store.load_chat_window(chat_id, last=size, owner=owner)
            rows, whole = window.tail, len(window.tail) >= window.info.message_count
        else:
            start = max(0, stop - size)
            rows = await store.load_message_range(chat_id, start=start, stop=stop, owner=owner)
            whole = start == 0
        messages = [Message.model_validate(m.data) for m in rows]
        if whole or any(m.is_user for m in messages):
            return messages
        size *= 8


@dataclass(frozen=True, slots=True)
class GroupTurnDraft:
    """What one group turn asks for: the chat (id and name), SillyTavern's generation
    ``kind``, the user's ``text`` (may be empty), ``member`` (a name or avatar) forcing that
    member to reply whatever the strategy and mute state (``/trigger``), ``rng`` drawing the
    selection, ``auto`` for an auto-mode tick (the members talk among themselves: no user
    message; the manual strategy drafts one at random), ``interrupt`` to stop a running
    turn, ``batch``, the replies' shared generation id, and ``at``: a ``normal`` turn (a
    resend) or a ``regenerate`` in place of message ``at`` on a new branch of the chat's
    tree (:func:`branch_at`)."""

    chat_id: str
    chat_name: str
    kind: str
    text: str = ""
    member: str | None = None
    rng: Rng | None = None
    auto: bool = False
    interrupt: bool = False
    batch: int | None = None
    at: int | None = None


async def run_group_turn(
    store: Store,
    draft: GroupTurnDraft,
    *,
    owner: str,
    slots: ChatSlots,
    store_input: Callable[[str], Awaitable[None]],
    generate: MemberGeneration,
    check: Callable[[Sequence[GroupMember]], Awaitable[None]] | None = None,
) -> GroupTurnOutcome:
    """One group turn (see the module docstring and :class:`GroupTurnDraft`).
    ``store_input`` stores the user's message; ``generate`` runs one member's generation;
    ``check`` refuses the chosen speakers (raises) before anything is written: no branch,
    no regenerated batch dropped, no user's message stored.
    """
    chat_id, kind, text, auto = draft.chat_id, draft.kind, draft.text, draft.auto
    member, rng, batch = draft.member, draft.rng, draft.batch
    loaded = await group_for_chat(store, draft.chat_name, owner=owner)
    if not loaded.members:
        raise Conflict(f"group {loaded.group.name!r} has no members to reply")
    forced = loaded.member(member).avatar if member is not None else None
    if auto and text:
        raise Conflict("an auto-mode tick takes no user message")
    async with slots.turn(chat_id, interrupt=draft.interrupt) as controller:
        at = draft.at
        if at is not None and kind == "regenerate":
            forced = forced or await reply_writer(store, loaded, chat_id, at, owner=owner)
        chat = await _selection_chat(store, chat_id, owner=owner, stop=at)
        dropped = _last_batch_size(chat) if kind == "regenerate" and at is None else 0
        request = SelectionRequest(
            group=loaded.group,
            members=loaded.members,
            chat=chat[: len(chat) - dropped],
            user_input=text,
            kind="normal" if kind == "regenerate" else kind,
            force=forced,
            auto=auto,
        )
        speakers = select_speakers(request, rng if rng is not None else random.random)
        # nothing is written before the speakers' checks pass (a writer that cannot be used)
        if check is not None:
            await check(speakers)
        if at is not None:
            await _fork_at(store, chat_id, at, owner=owner)
        elif dropped:
            await _drop_last_batch(store, chat_id, dropped, owner=owner)
        stored_input = False
        if text and kind in ("normal", "regenerate"):
            await store_input(chat_id)
            stored_input = True
        member_kind = kind if kind in ("swipe", "impersonate", "quiet", "continue") else "normal"
        replies: list[GroupReply] = []
        for speaker in speakers:
            outcome = await generate(
                chat_id, member_kind, speaker_for(loaded, speaker, batch=batch), controller
            )
            replies.append(GroupReply(speaker.name, speaker.avatar, outcome))
            if outcome.status != "completed":
                break
        return GroupTurnOutcome(kind, replies, stored_input)


async def reply_writer(
    store: Store, loaded: LoadedGroup, chat_id: str, at: int, *, owner: str
) -> str | None:
    """The avatar of the member who wrote reply ``at`` (regenerated on a new branch: that
    member speaks again, muted or not); ``None`` when the writer is no longer a member, so
    SillyTavern's group rules choose who replies. A user's message there is a
    :class:`~tavernkit.errors.FormatError` naming ``at``."""
    rows = await store.load_message_range(chat_id, start=at, stop=at + 1, owner=owner)
    if not rows:
        return None
    if rows[0].data.get("is_user"):
        raise FormatError(f"message {at} is the user's; regenerate a reply", field="at")
    return _member_avatar(loaded, rows[0].data)


async def _fork_at(store: Store, chat_id: str, at: int, *, owner: str) -> None:
    """Start a new branch of the chat's tree at message ``at`` (the messages from it on stay
    in the old branch, as a solo chat's regenerate or resend in its middle leaves them)."""
    try:
        await store.fork_chat(chat_id, at, owner=owner)
    except FormatError as exc:  # the turn's field is ``at``
        raise FormatError(exc.reason, field="at") from exc


def _member_avatar(loaded: LoadedGroup, data: Mapping[str, Any]) -> str | None:
    """The avatar of the member who wrote the stored message ``data``: its speaker's avatar
    (``original_avatar``), else its name; ``None`` when no member matches."""
    avatar = data.get("original_avatar")
    for member in loaded.members:
        if avatar and member.avatar == avatar:
            return member.avatar
    for member in loaded.members:
        if member.name == data.get("name"):
            return member.avatar
    return None


def _last_batch_size(chat: Sequence[Message]) -> int:
    """``regenerateGroup``: how many trailing character replies the last batch holds (same
    ``extra.gen_id`` as the last message; all trailing replies for messages without one)."""
    if not chat or chat[-1].is_user or chat[-1].is_system:
        return 0
    batch = chat[-1].extra.gen_id
    count = 0
    for message in reversed(chat):
        if message.is_user or message.is_system:
            break
        if batch is not None and message.extra.gen_id != batch:
            break
        count += 1
    return count


async def _drop_last_batch(store: Store, chat_id: str, count: int, *, owner: str) -> None:
    """Delete the last ``count`` messages (the last batch of replies) for a regenerate."""
    window = await store.load_chat_window(chat_id, last=count, owner=owner)
    start = window.tail[0].position
    if not await store.cut_would_drop(chat_id, start, owner=owner):
        await store.truncate_chat(chat_id, start, owner=owner)
        return
    # A branch of the chat's tree continues this batch: deleting it would delete that branch
    # too. The batch stays on the path it is on, with its branches, and the new one starts a
    # branch of its own (as a regenerate in the middle of a chat does).
    if start == 0:
        raise Conflict(
            "the greeting cannot be regenerated while other branches of the chat continue it; "
            "swipe it instead"
        )
    await store.fork_chat(chat_id, start, owner=owner)


async def create_group_chat(
    store: Store,
    group: str,
    *,
    owner: str,
    name: str | None,
    now: datetime,
    integrity: str,
    rng: Rng,
) -> ChatInfo:
    """A new chat of the stored group ``group``, listed in the group and made its open chat,
    with every member's greeting in list order, muted members included (each evaluated as
    that member, in the group), as SillyTavern opens a fresh group chat."""
    loaded = await load_group(store, group, owner=owner)
    messages: list[Message] = []
    for member in loaded.members:
        text = pick_greeting(member, rng)
        if text is None:
            continue
        # a greeting's macros read no world info: the member's lorebooks are not loaded
        state = await load_chat_state(
            store, owner=owner, character=loaded.character_ids[member.avatar], books=False
        )
        state = state.model_copy(update={"group": speaker_for(loaded, member).context})
        substitute = state_substitute(
            state, prompt_state_from_chat_state(state), compat=state.compat
        )
        greeting = Message.new(
            member.name, substitute(text.strip()), is_user=False, send_date=iso_timestamp(now)
        )
        greeting.ensure_swipes()
        # SillyTavern's greeting batch id (Date.now() * Math.random() * 1e6): each greeting is
        # a batch of its own, so a group regenerate replaces the last one only.
        greeting.extra.gen_id = now.timestamp() * 1000 * rng() * 1e6
        messages.append(mark_greeting(greeting, member))
    header = ChatHeader.new(ChatMetadata(integrity=integrity))
    info = await store.create_chat(
        header, messages, owner=owner, name=name or chat_name(loaded.group.name, now)
    )
    await attach_chat(store, loaded.id, info.name, owner=owner)
    return info


def pick_greeting(member: GroupMember, rng: Rng) -> str | None:
    """A member's greeting for a new group chat: one of ``first_mes`` and the alternate
    greetings (empty ones dropped), uniformly at random; ``None`` when it has none. Unlike a
    solo chat, the alternates do not become swipes."""
    character = member.character
    options = [g for g in (character.first_mes, *character.alternate_greetings) if g]
    if not options:
        return None
    return options[int(rng() * len(options))]


def mark_greeting(message: Message, member: GroupMember) -> Message:
    """``message`` as the member's greeting in a group chat (speaker avatar fields)."""
    set_group_avatar(message, member.avatar)
    return message
