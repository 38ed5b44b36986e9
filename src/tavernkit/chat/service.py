"""``ChatService``: what a user does in a chat, one turn at a time.

Every generating verb (:meth:`~ChatService.send`, :meth:`~ChatService.swipe`,
:meth:`~ChatService.regenerate`, :meth:`~ChatService.continue_`,
:meth:`~ChatService.impersonate`, :meth:`~ChatService.quiet`) is one turn:

1. the user's message (if any) is stored first, so it is never lost whatever happens next;
2. the state is loaded, world info scanned and the prompt built (:mod:`.prepare`), with the
   generation type passed through for lorebook and preset triggers;
3. the reply's place is stored empty and marked partial, then filled as it streams
   (:class:`~tavernkit.chat.sink.StoreSink`); a crash leaves the delivered text, partial;
4. the turn runner generates (:mod:`.run`); a stop keeps what was shown;
5. the reply is finalized in one message write (text, reasoning, model, dates) and the chat's
   variables and timed world-info state in one metadata write; the tools the turn ran (the
   Tavern's registered tools, offered by :mod:`.tools`) are stored as their own system
   message before the reply (:mod:`.tool_messages`).

User input is macro-evaluated when it is stored, as SillyTavern's ``sendMessageAsUser`` does
(``substituteParams``); the prompt builders evaluate stored messages again, which changes
nothing for text that had its macros replaced already.

One generation per chat at a time (:mod:`.slots`): a second turn raises
:class:`~tavernkit.errors.ChatBusy` unless it passes ``interrupt=True``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Unpack

from tavernkit.chat.display import Shown, shown_messages
from tavernkit.chat.greetings import chat_name, greeting_message, iso_timestamp
from tavernkit.chat.group_turn import preview_speaker
from tavernkit.chat.group_verbs import GroupVerbs
from tavernkit.chat.prepare import PreparedTurn, TurnDraft, TurnOverrides, prepare_turn
from tavernkit.chat.regex_text import regex_text, state_regex_text
from tavernkit.chat.reply import TurnOutcome, record_turn_error
from tavernkit.chat.review_setup import chat_review, set_chat_review
from tavernkit.chat.run import hooked_request
from tavernkit.chat.turn_options import Overrides, TurnCall, TurnKeywords
from tavernkit.chat.user_input import UserInput
from tavernkit.errors import Conflict, FormatError, NotFound
from tavernkit.models.character import Card
from tavernkit.models.chat import ChatHeader, ChatMetadata, ImagePart, Message
from tavernkit.models.profile import ReviewSettings
from tavernkit.prompt.pipeline import begin
from tavernkit.store.chat_state import load_chat_state
from tavernkit.store.chat_types import ChatInfo, ChatTree, StoredChat, StoredMessage
from tavernkit.store.chat_window import windowed
from tavernkit.store.revisions import check_message_revision, edit_lock

__all__ = ["ChatService", "TurnKeywords", "TurnOutcome"]


class ChatService(GroupVerbs):
    """The chat verbs over one :class:`~tavernkit.runtime.Runtime` (a Tavern's store, owner,
    plugins, tools and running generations; ``tk.chats`` is the Tavern's one service).

    ``clock`` gives the wall time stamped on messages; ``new_id`` the chat integrity ids;
    ``client``, ``local_factory`` and ``environ`` reach the provider resolution (tests inject
    a loopback client; the default ``local_factory`` is the Tavern's, so every turn and task
    of one Tavern shares one loaded embedded model). ``key_clock`` (epoch seconds) times
    key cooldowns, which are stored. The Tavern's registered tools are offered to
    ``normal``/``swipe``/``regenerate`` turns (:mod:`.tools`): ``function_call_mode``
    (``auto``, ``native``, ``prompt_xml``, ``prompt_json``) says how, ``max_tool_rounds``
    bounds the tool rounds of one reply, ``tool_rng`` draws the prompt protocols' trigger.
    """

    # -- chats -------------------------------------------------------------------------------

    async def new_chat(
        self, character: str, *, name: str | None = None, persona: str | None = None
    ) -> ChatInfo:
        """A new chat with ``character``, its greetings as the swipes of message 0."""
        # The greetings' macros and regex scripts read no world info (SillyTavern scans none
        # for a greeting): the character's lorebooks are not loaded.
        state = await load_chat_state(
            self.store, owner=self.owner, character=character, persona=persona, books=False
        )
        card = state.card
        if not isinstance(card, Card):
            raise NotFound(f"no character {character!r}")
        substitute = begin(state).substitute
        scripts = regex_text(state, substitute)
        now = self.clock()
        greeting = greeting_message(
            card.data.name,
            card.data.first_mes,
            list(card.data.alternate_greetings),
            substitute=substitute,
            send_date=iso_timestamp(now),
            regex=scripts.reply if scripts is not None else None,
        )
        header = ChatHeader.new(ChatMetadata(integrity=self.new_id()))
        return await self.store.create_chat(
            header,
            [greeting] if greeting is not None else [],
            owner=self.owner,
            name=name or chat_name(card.data.name, now),
            character=state.character_id or character,
        )

    async def shown(self, chat_id: str, messages: Sequence[StoredMessage]) -> dict[int, Shown]:
        """What stored ``messages`` of the chat show where display-only regex scripts change
        their text or reasoning, by position (see :mod:`.display`)."""
        info = await self.store.get_chat_info(chat_id, owner=self.owner)
        return await shown_messages(self.store, info.id, messages, owner=self.owner)

    async def load(self, chat_id: str) -> StoredChat:
        return await self.store.load_chat(chat_id, owner=self.owner)

    async def review(self, chat_ref: str) -> ReviewSettings | None:
        """The chat's own response-review setting (``None``: its profile's holds)."""
        return await chat_review(self.store, await self._chat_id(chat_ref), owner=self.owner)

    async def set_review(self, chat_ref: str, settings: ReviewSettings | None) -> None:
        """Turn response review of the chat's turns on (inherited or pinned reviewer) or off;
        ``None`` clears it so the profile's setting holds (see :mod:`.review_setup`)."""
        chat_id = await self._chat_id(chat_ref)
        await set_chat_review(self.store, chat_id, settings, owner=self.owner)

    async def latest_chat(self, character: str) -> ChatInfo | None:
        """The character's most recently updated chat."""
        chats = await self.store.list_chats(owner=self.owner, character=character)
        return chats[0] if chats else None

    async def branch(self, chat_id: str, message_index: int | None = None) -> ChatInfo:
        """A new chat holding the messages up to ``message_index`` (default: all), with
        ``main_chat`` naming the chat it came from, as SillyTavern's branches do."""
        stored = await self.load(chat_id)
        last = len(stored.messages) - 1 if message_index is None else message_index
        if not 0 <= last < len(stored.messages):
            raise NotFound(f"no message {message_index} in chat {stored.info.name!r}")
        header = dict(stored.header)
        metadata = dict(header.get("chat_metadata") or {})
        metadata["main_chat"] = stored.info.name
        metadata["integrity"] = self.new_id()
        header["chat_metadata"] = metadata
        now = self.clock()
        name = f"Branch #{last} - {now.strftime('%Y-%m-%d@%Hh%Mm%Ss')}"
        return await self.store.create_chat(
            header,
            [m.data for m in stored.messages[: last + 1]],
            owner=self.owner,
            name=name,
            character=stored.info.character_id,
        )

    # -- the chat's tree ---------------------------------------------------------------------

    async def tree(self, chat_id: str) -> ChatTree:
        """The chat's branches and which path is current (:mod:`tavernkit.store.chat_tree`)."""
        return await self.store.chat_tree(chat_id, owner=self.owner)

    async def fork(self, chat_id: str, message_index: int) -> str:
        """Start a new branch at message ``message_index`` (the messages from it on stay in
        their branch), holding the chat's slot so no turn writes meanwhile; its id."""
        info = await self.store.get_chat_info(chat_id, owner=self.owner)
        async with self.slots.turn(info.id, interrupt=False):
            return await self.store.fork_chat(info.id, message_index, owner=self.owner)

    async def switch_branch(self, chat_id: str, branch: str) -> None:
        """Make ``branch``'s path the chat's current one (refused while a turn generates)."""
        info = await self.store.get_chat_info(chat_id, owner=self.owner)
        async with self.slots.turn(info.id, interrupt=False):
            await self.store.switch_branch(info.id, branch, owner=self.owner)

    # -- editing -----------------------------------------------------------------------------

    async def edit(
        self,
        chat_id: str,
        message_index: int,
        text: str,
        *,
        reasoning: str | None = None,
        revision: str | None = None,
    ) -> Message:
        """Replace a message's text (its shown swipe too); ``reasoning`` edits its reasoning.
        An unfinished reply (:mod:`.incomplete`) is finished by the edit: mark and error go.
        ``revision``: the message's revision as the caller read it; another one now raises
        :class:`~tavernkit.errors.StaleRevision` and nothing is written (``None``: no check)."""
        # Edits of one chat that check a revision run one at a time, so two that read the
        # same revision cannot both pass the check before either writes.
        async with edit_lock(self.owner, chat_id):
            return await self._edit(chat_id, message_index, text, reasoning, revision)

    async def _edit(
        self,
        chat_id: str,
        message_index: int,
        text: str,
        reasoning: str | None,
        revision: str | None,
    ) -> Message:
        info, entry = await self._message_row(chat_id, message_index)
        check_message_revision(entry, revision)
        message = Message.model_validate(entry.data)
        text, reasoning = await self._edit_scripts(info.id, message, text, reasoning)
        message.mes = text
        record_turn_error(message, None)  # an edited reply is the user's, finished
        if reasoning is not None:
            message.extra.reasoning = reasoning
            message.extra.reasoning_type = "edited"
        message.sync_to_swipe()
        await self.store.update_message(entry.id, message, owner=self.owner)
        return message

    async def _edit_scripts(
        self, chat_id: str, message: Message, text: str, reasoning: str | None
    ) -> tuple[str, str | None]:
        """``text`` and ``reasoning`` after the plain scripts that run on edits (``runOnEdit``),
        read from the chat's tail (their macros may read the chat: a longer tail if they read
        past it) with no lorebook, which an edit's scripts never see."""

        async def attempt(window: int) -> tuple[str, str | None]:
            state = await load_chat_state(
                self.store, owner=self.owner, chat_id=chat_id, window=window, books=False
            )
            scripts = state_regex_text(state)
            if scripts is None:
                return text, reasoning
            edited = scripts.edit(message, text)
            return edited, scripts.edit_reasoning(reasoning) if reasoning else reasoning

        return await windowed(chat_id, attempt)

    async def _message_row(
        self, chat_ref: str, index: int | None
    ) -> tuple[ChatInfo, StoredMessage]:
        """The chat's info and its message ``index`` (the last with ``None``), read alone: a
        change to one message costs the same on a chat of any length."""
        info = await self.store.get_chat_info(chat_ref, owner=self.owner)
        at = info.message_count - 1 if index is None else index
        rows = []
        if at >= 0:
            rows = await self.store.load_message_range(
                info.id, start=at, stop=at + 1, owner=self.owner
            )
        if not rows:
            raise NotFound(f"no message {at} in chat {info.name!r}")
        return info, rows[0]

    async def set_hidden(
        self, chat_id: str, message_index: int, hidden: bool, *, revision: str | None = None
    ) -> Message:
        """Hide a message from the prompts (SillyTavern's ghost: ``is_system``) or show it
        again; it stays in the chat. Reads and writes that one message. ``revision``: the
        message's as the caller read it; another one now raises
        :class:`~tavernkit.errors.StaleRevision` and nothing changes (``None``: no check)."""
        async with _checked(self.owner, chat_id, revision):
            _, entry = await self._message_row(chat_id, message_index)
            check_message_revision(entry, revision)
            message = Message.model_validate(entry.data)
            message.is_system = hidden
            await self.store.update_message(entry.id, message, owner=self.owner)
            return message

    async def delete_from(
        self, chat_id: str, message_index: int, *, revision: str | None = None
    ) -> int:
        """Delete message ``message_index`` and every later one (SillyTavern's delete mode);
        returns how many went. ``revision``: message ``message_index``'s as the caller read
        it; another one now raises :class:`~tavernkit.errors.StaleRevision` and nothing goes."""
        async with _checked(self.owner, chat_id, revision):
            info = await self.store.get_chat_info(chat_id, owner=self.owner)
            if not 0 <= message_index < info.message_count:
                raise NotFound(f"no message {message_index} in chat {info.name!r}")
            if revision is not None:
                rows = await self.store.load_message_range(
                    info.id, start=message_index, stop=message_index + 1, owner=self.owner
                )
                check_message_revision(rows[0], revision)
            return await self.store.truncate_chat(info.id, message_index, owner=self.owner)

    async def delete(
        self, chat_id: str, message_index: int, *, count: int = 1, revision: str | None = None
    ) -> int:
        """Delete ``count`` messages from ``message_index``; returns how many went. The
        messages after them move up, keeping their ids (and the chat's branches with them).
        ``revision``: message ``message_index``'s as the caller read it; another one now
        raises :class:`~tavernkit.errors.StaleRevision` and nothing goes (``None``: no check),
        so a tab showing an old list never deletes the message that moved into its place."""
        if revision is None:
            return await self._delete(chat_id, message_index, count, None)
        async with edit_lock(self.owner, chat_id):
            return await self._delete(chat_id, message_index, count, revision)

    async def _delete(
        self, chat_id: str, message_index: int, count: int, revision: str | None
    ) -> int:
        info, entry = await self._message_row(chat_id, message_index)
        check_message_revision(entry, revision)
        # the later messages move up in place (ids kept), and so do the branches of the
        # chat's tree that continue them
        return await self.store.remove_messages(info.id, message_index, count, owner=self.owner)

    async def select_swipe(
        self,
        chat_id: str,
        swipe_index: int,
        *,
        message_index: int | None = None,
        revision: str | None = None,
    ) -> Message:
        """Show an existing swipe (swiping back); the last message unless told otherwise.
        ``revision``: the message's as the caller read it (see :meth:`set_hidden`)."""
        async with _checked(self.owner, chat_id, revision):
            _, entry = await self._message_row(chat_id, message_index)
            check_message_revision(entry, revision)
            message = Message.model_validate(entry.data)
            count = len(message.swipes or [])
            if not 0 <= swipe_index < count:
                raise NotFound(f"no swipe {swipe_index} (the message has {count})")
            await self.store.set_active_swipe(entry.id, swipe_index, owner=self.owner)
            message.select_swipe(swipe_index)
            return message

    async def delete_swipe(
        self, chat_id: str, message_index: int, swipe_index: int, *, revision: str | None = None
    ) -> None:
        """Delete swipe ``swipe_index`` of a message. ``revision``: the message's as the
        caller read it, so a swipe another tab added or removed meanwhile never makes this
        one delete the wrong swipe (see :meth:`set_hidden`)."""
        async with _checked(self.owner, chat_id, revision):
            _, entry = await self._message_row(chat_id, message_index)
            check_message_revision(entry, revision)
            count = len(entry.data.get("swipes") or [])
            if not 0 <= swipe_index < count:
                raise NotFound(f"no swipe {swipe_index} (the message has {count})")
            await self.store.delete_swipe(entry.id, swipe_index, owner=self.owner)

    # -- turns -------------------------------------------------------------------------------

    def busy(self, chat_id: str) -> bool:
        return self.slots.busy(chat_id)

    def stop(self, chat_id: str) -> bool:
        """Stop the chat's running turn; what it delivered stays. Whether one was running."""
        stopped = self.slots.stop(chat_id)
        return self.runtime.generations.stop(chat_id) or stopped

    async def send(
        self,
        chat_id: str,
        text: str,
        *,
        attachments: Sequence[ImagePart | str] = (),
        prefill: str | None = None,
        at: int | None = None,
        **options: Unpack[TurnKeywords],
    ) -> TurnOutcome:
        """Store the user's message (``text`` plus image ``attachments``), then generate the
        character's reply. An empty ``text`` with no attachments just asks for a reply.
        ``at``: send in place of message ``at`` (edit and resend) on a new branch; the
        messages from ``at`` on stay in the old one."""

        async def store_input(chat_id: str) -> UserInput | None:
            if at is not None:
                await self._fork_for_turn(chat_id, at)
            if text or attachments:
                overrides = options.get("overrides")
                return await self.inputs.write(chat_id, text, attachments, overrides)
            return None

        turn = TurnCall.of("normal", options, prefill=prefill)
        return await self._turn(chat_id, turn, before=store_input)

    async def swipe(
        self,
        chat_id: str,
        *,
        prefill: str | None = None,
        **options: Unpack[TurnKeywords],
    ) -> TurnOutcome:
        """A new alternative for the last reply, shown; the earlier ones (and their
        reasoning) stay as swipes to go back to with :meth:`select_swipe`."""
        turn = TurnCall.of("swipe", options, prefill=prefill)
        return await self._turn(chat_id, turn)

    async def regenerate(
        self,
        chat_id: str,
        *,
        prefill: str | None = None,
        at: int | None = None,
        **options: Unpack[TurnKeywords],
    ) -> TurnOutcome:
        """Replace the last reply with a new one (its swipes go with it). ``at``: regenerate
        reply ``at`` in the middle of the chat instead, on a new branch; the old reply and
        what followed it stay in the old branch (:meth:`tree`, :meth:`switch_branch`)."""

        async def drop_last_reply(chat_id: str) -> None:
            if at is not None:
                await self._fork_at_reply(chat_id, at)
                return
            window = await self.store.load_chat_window(chat_id, last=1, owner=self.owner)
            if window.tail and not window.tail[-1].data.get("is_user"):
                if window.info.message_count == 1:
                    raise Conflict("the greeting cannot be regenerated; swipe it instead")
                await self._drop_reply(chat_id, window.tail[-1].position)

        turn = TurnCall.of("regenerate", options, prefill=prefill)
        return await self._turn(chat_id, turn, before=drop_last_reply)

    async def _drop_reply(self, chat_id: str, position: int) -> None:
        """Delete the last reply, unless a branch of the chat's tree continues it: then the
        reply stays on its path, with that branch, and the new one starts a branch."""
        if await self.store.cut_would_drop(chat_id, position, owner=self.owner):
            await self.store.fork_chat(chat_id, position, owner=self.owner)
        else:
            await self.store.truncate_chat(chat_id, position, owner=self.owner)

    async def _fork_at_reply(self, chat_id: str, at: int) -> None:
        rows = await self.store.load_message_range(chat_id, start=at, stop=at + 1, owner=self.owner)
        if rows and rows[0].data.get("is_user"):
            raise FormatError(f"message {at} is the user's; regenerate a reply", field="at")
        await self._fork_for_turn(chat_id, at)

    async def _fork_for_turn(self, chat_id: str, at: int) -> None:
        try:
            await self.store.fork_chat(chat_id, at, owner=self.owner)
        except FormatError as exc:  # the turn's field is ``at``
            raise FormatError(exc.reason, field="at") from exc

    async def continue_(
        self,
        chat_id: str,
        **options: Unpack[TurnKeywords],
    ) -> TurnOutcome:
        """Extend the last reply; the new text is appended to its shown swipe. A model that
        starts by repeating the reply has that copy stripped, byte for byte (the matcher the
        turn runner uses for carried text), so the reply is never doubled."""
        turn = TurnCall.of("continue", options)
        return await self._turn(chat_id, turn)

    async def impersonate(
        self,
        chat_id: str,
        **options: Unpack[TurnKeywords],
    ) -> TurnOutcome:
        """Write the user's next message. Nothing is stored: as in SillyTavern the text is a
        suggestion for the input box; send it with :meth:`send`."""
        turn = TurnCall.of("impersonate", options)
        return await self._turn(chat_id, turn)

    async def quiet(
        self,
        chat_id: str,
        quiet_prompt: str,
        *,
        quiet_to_loud: bool = False,
        quiet_name: str | None = None,
        **options: Unpack[TurnKeywords],
    ) -> TurnOutcome:
        """A background generation on the chat with ``quiet_prompt`` as the last instruction.
        Nothing is stored unless ``quiet_to_loud``, which appends the reply as the
        character's message (``generate_quiet_prompt(quiet_to_loud=True)``)."""
        turn = TurnCall.of(
            "quiet",
            {"stream": False, **options},
            quiet_prompt=quiet_prompt,
            quiet_name=quiet_name,
            loud=quiet_to_loud,
        )
        return await self._turn(chat_id, turn)

    async def append_reply(
        self, chat_id: str, text: str, *, reasoning: str = "", model: str | None = None
    ) -> int:
        """Append ``text`` as the character's message (the ``quiet_to_loud`` path of a quiet
        generation made elsewhere); returns its index."""
        chat_id = await self._chat_id(chat_id)
        state = await load_chat_state(self.store, owner=self.owner, chat_id=chat_id)
        char = state.character.name if state.character is not None else ""
        message = self.replies.reply_message(char, "openai", model)
        message.mes = text
        message.extra.reasoning = reasoning
        message.gen_finished = self._now()
        message.sync_to_swipe()
        stored = await self.store.append_message(chat_id, message, owner=self.owner)
        return stored.position

    async def preview(
        self,
        chat_id: str,
        *,
        kind: str = "normal",
        overrides: Overrides = None,
        member: str | None = None,
    ) -> PreparedTurn:
        """The turn the next generation of ``kind`` would run (a dry run: nothing is stored,
        no timed effect advances). The plugins' request hooks run on it as in a turn, so
        ``request`` is what would be sent; ``built_request`` keeps the request as built when
        a hook changed it (see :func:`~tavernkit.chat.run.hooked_request`). In a group chat
        it is ``member``'s turn (default: the first unmuted member's)."""
        chat_id = await self._chat_id(chat_id)
        speaker = await preview_speaker(self.store, chat_id, member, owner=self.owner)
        draft = TurnDraft(
            chat_id,
            kind,
            TurnOverrides.of(overrides),
            dry_run=True,
            without_last_reply=kind == "regenerate",
            character=speaker.character_id if speaker else None,
            group=speaker.context if speaker else None,
        )
        prepared = await prepare_turn(self.turn_deps(), draft)
        offer = await self._offer_tools(kind, prepared.connection)
        if offer is not None:
            prepared = replace(prepared, request=offer.apply(prepared.request))
        request = hooked_request(self.runtime.plugins, chat_id, kind, prepared.request)
        if request is prepared.request:
            return prepared
        return replace(prepared, request=request, built_request=prepared.request)


@asynccontextmanager
async def _checked(owner: str, chat_id: str, revision: str | None) -> AsyncIterator[None]:
    """The chat's edit lock while a change checks a revision (check and write together, as
    :meth:`ChatService.edit` does); nothing to hold for a change that checks none."""
    if revision is None:
        yield
        return
    async with edit_lock(owner, chat_id):
        yield
