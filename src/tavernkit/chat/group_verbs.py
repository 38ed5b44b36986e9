"""The group chat verbs of :class:`~tavernkit.chat.service.ChatService` (:class:`GroupVerbs`);
the logic — who speaks, in which order, what each member sees — is :mod:`.group_turn`'s."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Unpack

from tavernkit.chat.group_speaker import GroupSpeaker
from tavernkit.chat.group_turn import (
    GroupTurnDraft,
    GroupTurnOutcome,
    create_group_chat,
    run_group_turn,
)
from tavernkit.chat.reply import TurnOutcome
from tavernkit.chat.turn_core import TurnCore
from tavernkit.chat.turn_options import TurnCall, TurnKeywords
from tavernkit.generation.abort import AbortController
from tavernkit.generation.sink import ResponseSink
from tavernkit.models.group import GroupMember
from tavernkit.store.chat_types import ChatInfo

__all__ = ["GroupVerbs"]


class GroupVerbs(TurnCore):
    """Opening a group chat and taking its turns, over the shared :class:`~.turn_core.TurnCore`."""

    async def new_group_chat(
        self, group: str, *, name: str | None = None, rng: Callable[[], float] | None = None
    ) -> ChatInfo:
        """A new chat of the stored group ``group`` (id or name), listed in the group and
        made its open chat: every member's greeting in list order, muted members included
        (one greeting each, drawn from ``rng``), as SillyTavern opens a fresh group chat."""
        return await create_group_chat(
            self.store,
            group,
            owner=self.owner,
            name=name,
            now=self.clock(),
            integrity=self.new_id(),
            rng=rng or random.random,
        )

    async def group_turn(
        self,
        chat_id: str,
        kind: str = "normal",
        *,
        text: str = "",
        member: str | None = None,
        quiet_prompt: str = "",
        rng: Callable[[], float] | None = None,
        auto: bool = False,
        member_sink: Callable[[str], ResponseSink | None] | None = None,
        at: int | None = None,
        **options: Unpack[TurnKeywords],
    ) -> GroupTurnOutcome:
        """A turn of a group chat: ``text`` (the user's message, may be empty) goes in, then
        one or several members reply per the group's strategy, or ``member`` (a name) when
        given, whatever the strategy and mute state. ``kind`` is ``normal``, ``regenerate``
        (replaces the last batch of replies), ``swipe``/``continue`` (the last speaker),
        ``impersonate`` (a random member's view; nothing stored) or ``quiet`` (with
        ``quiet_prompt``; nothing stored). ``rng`` draws the selection (SillyTavern's
        ``Math.random``); ``auto`` is an auto-mode tick (the members go on among themselves;
        call it every ``Group.auto_mode_delay`` seconds while nothing else runs);
        ``member_sink`` gives each member's reply a sink of its own (by the member's name)
        instead of the one ``sink``. ``at``: a ``normal`` turn (a resend of ``text``) or a
        ``regenerate`` in place of message ``at``, on a new branch of the chat's tree (the
        old messages stay in theirs); a regenerate has the member who wrote reply ``at``
        speak again (SillyTavern's group rules choose when that member has left)."""
        info = await self.store.get_chat_info(chat_id, owner=self.owner)
        base = TurnCall.of(
            kind,
            {"stream": False, **options} if kind == "quiet" else options,
            quiet_prompt=quiet_prompt,
        )
        await self.check_overrides(base.overrides)

        async def store_input(chat_id: str) -> None:
            await self.inputs.write(chat_id, text, (), base.overrides, reuse=False)

        async def generate(
            chat_id: str, member_kind: str, speaker: GroupSpeaker, controller: AbortController
        ) -> TurnOutcome:
            sink = member_sink(speaker.name) if member_sink is not None else base.sink
            turn = replace(base, kind=member_kind, member=speaker, sink=sink)
            return await self._generate(chat_id, turn, controller)

        async def check(speakers: Sequence[GroupMember]) -> None:
            for speaker in speakers:
                await self.check_card_writer(speaker.character, base.overrides)

        draft = GroupTurnDraft(
            info.id,
            info.name,
            kind,
            text=text,
            member=member,
            rng=rng,
            auto=auto,
            interrupt=base.interrupt,
            batch=int(self.clock().timestamp() * 1000),
            at=at,
        )
        return await run_group_turn(
            self.store,
            draft,
            owner=self.owner,
            slots=self.slots,
            store_input=store_input,
            generate=generate,
            check=check,
        )

    async def trigger(
        self, chat_id: str, member: str, **options: Unpack[TurnKeywords]
    ) -> GroupTurnOutcome:
        """``/trigger NAME``: the group member ``member`` replies now (muted or not)."""
        return await self.group_turn(chat_id, "normal", member=member, **options)
