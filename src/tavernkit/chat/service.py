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
   variables and timed world-info state in one metadata write.

User input is macro-evaluated when it is stored, as SillyTavern's ``sendMessageAsUser`` does
(``substituteParams``); the prompt builders evaluate stored messages again, which changes
nothing for text that had its macros replaced already.

One generation per chat at a time (:mod:`.slots`): a second turn raises
:class:`~tavernkit.errors.ChatBusy` unless it passes ``interrupt=True``.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tavernkit.chat.greetings import chat_name, greeting_message, iso_timestamp
from tavernkit.chat.plan import PlanSources, chat_plan
from tavernkit.chat.prepare import PreparedTurn, TurnOverrides, prepare_turn, resolve_profile
from tavernkit.chat.run import run_request
from tavernkit.chat.sink import StoreSink, TeeSink
from tavernkit.chat.slots import ChatSlots
from tavernkit.errors import Conflict, NotFound
from tavernkit.generation.abort import AbortController, AbortSignal, StreamingProcessor
from tavernkit.generation.profiles import LocalFactory, ResolvedConnection
from tavernkit.generation.result import TurnError, TurnResult
from tavernkit.generation.sink import ResponseSink
from tavernkit.models.character import Card
from tavernkit.models.chat import ChatHeader, ChatMetadata, ImagePart, Message, TextPart
from tavernkit.models.profile import ConnectionProfile
from tavernkit.prompt.from_chat_state import prompt_state_from_chat_state, state_substitute
from tavernkit.prompt.reasoning import parse_reasoning
from tavernkit.store.chat_state import load_chat_state
from tavernkit.store.protocol import ChatInfo, Store, StoredChat
from tavernkit.text.variables import InMemoryVariables

if TYPE_CHECKING:
    from tavernkit.facade import Tavern

__all__ = ["ChatService", "TurnOutcome"]

Overrides = TurnOverrides | Mapping[str, Any] | None


@dataclass(frozen=True)
class TurnOutcome:
    """What a turn left: the reply (or the impersonated / quiet text) and where it is stored.

    ``status`` is ``completed``, ``failed`` (``error`` says why, safely) or ``aborted``
    (stopped; the delivered text is kept). ``message_index`` / ``swipe_index`` are ``None``
    when nothing was stored (impersonation, a quiet prompt, a failure that delivered nothing).
    """

    kind: str
    status: str
    text: str
    reasoning: str = ""
    message_index: int | None = None
    message_id: str | None = None
    swipe_index: int | None = None
    model: str | None = None
    error: TurnError | None = None
    result: TurnResult | None = None


@dataclass
class _Target:
    """Where a reply streams to: a new message, a new swipe, or the end of a reply."""

    mode: str  # "message" | "swipe" | "continue" | "none"
    message_id: str | None = None
    position: int | None = None
    swipe_index: int | None = None
    previous_swipe: int | None = None
    message: Message | None = None
    prefix: str = ""
    reasoning_prefix: str = ""


class ChatService:
    """The chat verbs over one :class:`~tavernkit.facade.Tavern` (its store and owner).

    ``clock`` gives the wall time stamped on messages; ``new_id`` the chat integrity ids;
    ``client``, ``local_factory`` and ``environ`` reach the provider resolution (tests inject
    a loopback client; the default ``local_factory`` is the Tavern's, so every turn and task
    of one Tavern shares one loaded embedded model). ``key_clock`` (epoch seconds) times
    key cooldowns, which are stored.
    """

    def __init__(
        self,
        tavern: Tavern,
        *,
        clock: Callable[[], datetime] | None = None,
        new_id: Callable[[], str] | None = None,
        client: Any = None,
        local_factory: LocalFactory | None = None,
        environ: Mapping[str, str] | None = None,
        rng: Callable[[], float] | None = None,
        stream_interval: float = 0.2,
        key_clock: Callable[[], float] = time.time,
    ) -> None:
        self.tavern = tavern
        self.clock = clock or (lambda: datetime.now(UTC))
        self.new_id = new_id or (lambda: str(uuid.uuid4()))
        self.client = client
        self.local_factory: LocalFactory = local_factory or tavern.local_provider
        self.environ = environ
        self.rng = rng
        self.stream_interval = stream_interval
        self.key_clock = key_clock
        self.slots = ChatSlots()

    @property
    def store(self) -> Store:
        return self.tavern.store

    @property
    def owner(self) -> str:
        return self.tavern.owner

    def _now(self) -> str:
        return iso_timestamp(self.clock())

    # -- chats -------------------------------------------------------------------------------

    async def new_chat(
        self, character: str, *, name: str | None = None, persona: str | None = None
    ) -> ChatInfo:
        """A new chat with ``character``, its greetings as the swipes of message 0."""
        state = await load_chat_state(
            self.store, owner=self.owner, character=character, persona=persona
        )
        card = state.card
        if not isinstance(card, Card):
            raise NotFound(f"no character {character!r}")
        pstate = prompt_state_from_chat_state(state)
        substitute = state_substitute(state, pstate, compat=state.compat)
        now = self.clock()
        greeting = greeting_message(
            card.data.name,
            card.data.first_mes,
            list(card.data.alternate_greetings),
            substitute=substitute,
            send_date=iso_timestamp(now),
        )
        header = ChatHeader.new(ChatMetadata(integrity=self.new_id()))
        return await self.store.create_chat(
            header,
            [greeting] if greeting is not None else [],
            owner=self.owner,
            name=name or chat_name(card.data.name, now),
            character=state.character_id or character,
        )

    async def load(self, chat_id: str) -> StoredChat:
        return await self.store.load_chat(chat_id, owner=self.owner)

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

    # -- editing -----------------------------------------------------------------------------

    async def edit(
        self, chat_id: str, message_index: int, text: str, *, reasoning: str | None = None
    ) -> Message:
        """Replace a message's text (its shown swipe too); ``reasoning`` edits its reasoning."""
        stored = await self.load(chat_id)
        entry = _message_at(stored, message_index)
        message = Message.model_validate(entry.data)
        message.mes = text
        if reasoning is not None:
            message.extra.reasoning = reasoning
            message.extra.reasoning_type = "edited"
        message.sync_to_swipe()
        await self.store.update_message(entry.id, message, owner=self.owner)
        return message

    async def delete(self, chat_id: str, message_index: int, *, count: int = 1) -> int:
        """Delete ``count`` messages from ``message_index``; returns how many went. The
        messages after them move up (the store deletes by position, so they are re-added)."""
        stored = await self.load(chat_id)
        _message_at(stored, message_index)
        later = [m.data for m in stored.messages[message_index + count :]]
        removed = await self.store.truncate_chat(stored.info.id, message_index, owner=self.owner)
        for data in later:
            await self.store.append_message(stored.info.id, data, owner=self.owner)
        return removed - len(later)

    async def select_swipe(
        self, chat_id: str, swipe_index: int, *, message_index: int | None = None
    ) -> Message:
        """Show an existing swipe (swiping back); the last message unless told otherwise."""
        stored = await self.load(chat_id)
        entry = _message_at(
            stored, len(stored.messages) - 1 if message_index is None else message_index
        )
        message = Message.model_validate(entry.data)
        count = len(message.swipes or [])
        if not 0 <= swipe_index < count:
            raise NotFound(f"no swipe {swipe_index} (the message has {count})")
        await self.store.set_active_swipe(entry.id, swipe_index, owner=self.owner)
        message.select_swipe(swipe_index)
        return message

    # -- turns -------------------------------------------------------------------------------

    def busy(self, chat_id: str) -> bool:
        return self.slots.busy(chat_id)

    def stop(self, chat_id: str) -> bool:
        """Stop the chat's running turn; what it delivered stays. Whether one was running."""
        stopped = self.slots.stop(chat_id)
        return self.tavern.generations.stop(chat_id) or stopped

    async def send(
        self,
        chat_id: str,
        text: str,
        *,
        attachments: Sequence[ImagePart | str] = (),
        prefill: str | None = None,
        stream: bool = True,
        overrides: Overrides = None,
        sink: ResponseSink | None = None,
        interrupt: bool = False,
        abort: AbortSignal | None = None,
    ) -> TurnOutcome:
        """Store the user's message (``text`` plus image ``attachments``), then generate the
        character's reply. An empty ``text`` with no attachments just asks for a reply."""
        chat_id = await self._chat_id(chat_id)
        async with self.slots.turn(chat_id, interrupt=interrupt) as controller:
            if text or attachments:
                await self._store_user_message(chat_id, text, attachments, overrides)
            return await self._generate(
                chat_id, "normal", controller, abort, sink, prefill, stream, overrides
            )

    async def swipe(
        self,
        chat_id: str,
        *,
        prefill: str | None = None,
        stream: bool = True,
        overrides: Overrides = None,
        sink: ResponseSink | None = None,
        interrupt: bool = False,
        abort: AbortSignal | None = None,
    ) -> TurnOutcome:
        """A new alternative for the last reply, shown; the earlier ones (and their
        reasoning) stay as swipes to go back to with :meth:`select_swipe`."""
        chat_id = await self._chat_id(chat_id)
        async with self.slots.turn(chat_id, interrupt=interrupt) as controller:
            return await self._generate(
                chat_id, "swipe", controller, abort, sink, prefill, stream, overrides
            )

    async def regenerate(
        self,
        chat_id: str,
        *,
        prefill: str | None = None,
        stream: bool = True,
        overrides: Overrides = None,
        sink: ResponseSink | None = None,
        interrupt: bool = False,
        abort: AbortSignal | None = None,
    ) -> TurnOutcome:
        """Replace the last reply with a new one (its swipes go with it)."""
        chat_id = await self._chat_id(chat_id)
        async with self.slots.turn(chat_id, interrupt=interrupt) as controller:
            stored = await self.load(chat_id)
            if stored.messages and not stored.messages[-1].data.get("is_user"):
                if len(stored.messages) == 1:
                    raise Conflict("the greeting cannot be regenerated; swipe it instead")
                await self.store.truncate_chat(
                    chat_id, stored.messages[-1].position, owner=self.owner
                )
            return await self._generate(
                chat_id, "regenerate", controller, abort, sink, prefill, stream, overrides
            )

    async def continue_(
        self,
        chat_id: str,
        *,
        stream: bool = True,
        overrides: Overrides = None,
        sink: ResponseSink | None = None,
        interrupt: bool = False,
        abort: AbortSignal | None = None,
    ) -> TurnOutcome:
        """Extend the last reply; the new text is appended to its shown swipe."""
        chat_id = await self._chat_id(chat_id)
        async with self.slots.turn(chat_id, interrupt=interrupt) as controller:
            return await self._generate(
                chat_id, "continue", controller, abort, sink, None, stream, overrides
            )

    async def impersonate(
        self,
        chat_id: str,
        *,
        stream: bool = True,
        overrides: Overrides = None,
        sink: ResponseSink | None = None,
        interrupt: bool = False,
        abort: AbortSignal | None = None,
    ) -> TurnOutcome:
        """Write the user's next message. Nothing is stored: as in SillyTavern the text is a
        suggestion for the input box; send it with :meth:`send`."""
        chat_id = await self._chat_id(chat_id)
        async with self.slots.turn(chat_id, interrupt=interrupt) as controller:
            return await self._generate(
                chat_id, "impersonate", controller, abort, sink, None, stream, overrides
            )

    async def quiet(
        self,
        chat_id: str,
        quiet_prompt: str,
        *,
        quiet_to_loud: bool = False,
        quiet_name: str | None = None,
        stream: bool = False,
        overrides: Overrides = None,
        sink: ResponseSink | None = None,
        interrupt: bool = False,
        abort: AbortSignal | None = None,
    ) -> TurnOutcome:
        """A background generation on the chat with ``quiet_prompt`` as the last instruction.
        Nothing is stored unless ``quiet_to_loud``, which appends the reply as the
        character's message (``generate_quiet_prompt(quiet_to_loud=True)``)."""
        chat_id = await self._chat_id(chat_id)
        async with self.slots.turn(chat_id, interrupt=interrupt) as controller:
            return await self._generate(
                chat_id,
                "quiet",
                controller,
                abort,
                sink,
                None,
                stream,
                overrides,
                quiet_prompt=quiet_prompt,
                quiet_name=quiet_name,
                loud=quiet_to_loud,
            )

    async def append_reply(
        self, chat_id: str, text: str, *, reasoning: str = "", model: str | None = None
    ) -> int:
        """Append ``text`` as the character's message (the ``quiet_to_loud`` path of a quiet
        generation made elsewhere); returns its index."""
        chat_id = await self._chat_id(chat_id)
        state = await load_chat_state(self.store, owner=self.owner, chat_id=chat_id)
        char = state.character.name if state.character is not None else ""
        message = self._reply_message(char, "openai", model)
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
    ) -> PreparedTurn:
        """The turn the next generation of ``kind`` would run (a dry run: nothing is stored,
        no timed effect advances)."""
        chat_id = await self._chat_id(chat_id)
        prepared = await prepare_turn(
            self.store,
            owner=self.owner,
            chat_id=chat_id,
            kind=kind,
            overrides=TurnOverrides.of(overrides),
            dry_run=True,
            without_last_reply=kind == "regenerate",
            rng=self.rng,
            client=self.client,
            local_factory=self.local_factory,
            environ=self.environ,
        )
        return prepared

    # -- internals ---------------------------------------------------------------------------

    async def _chat_id(self, ref: str) -> str:
        info = await self.store.get_chat_info(ref, owner=self.owner)
        return info.id

    async def _store_user_message(
        self,
        chat_id: str,
        text: str,
        attachments: Sequence[ImagePart | str],
        overrides: Overrides,
    ) -> None:
        ov = TurnOverrides.of(overrides)
        state = await load_chat_state(
            self.store, owner=self.owner, chat_id=chat_id, persona=ov.persona
        )
        variables = InMemoryVariables(dict(state.local_variables), dict(state.global_variables))
        pstate = prompt_state_from_chat_state(state)
        substitute = state_substitute(
            state, pstate, compat=ov.compat or state.compat, variables=variables
        )
        content: str | list[TextPart | ImagePart] = substitute(text)
        if attachments:
            images = [a if isinstance(a, ImagePart) else ImagePart.from_url(a) for a in attachments]
            content = [*([TextPart(text=content)] if content else []), *images]
        message = Message.new(state.user_name, content, is_user=True, send_date=self._now())
        await self.store.append_message(chat_id, message, owner=self.owner)
        if variables.local_vars != state.local_variables and state.chat is not None:
            metadata = state.chat.metadata.model_copy(deep=True)
            metadata.variables = variables.local_vars
            await self.store.update_chat_metadata(chat_id, metadata.to_wire(), owner=self.owner)
        await self._save_globals(variables, state.global_variables)

    async def _save_globals(self, variables: InMemoryVariables, before: Mapping[str, Any]) -> None:
        for name, value in variables.global_vars.items():
            if before.get(name) != value:
                await self.store.set_global_variable(name, value, owner=self.owner)

    def _reply_message(self, char_name: str, api: str, model: str | None) -> Message:
        now = self._now()
        message = Message.new(char_name, "", is_user=False, send_date=now)
        message.extra.api = api
        message.extra.model = model
        message.gen_started = now
        message.ensure_swipes()
        return message

    async def _target(self, chat_id: str, kind: str, prepared: PreparedTurn, loud: bool) -> _Target:
        if kind == "impersonate" or (kind == "quiet" and not loud):
            return _Target("none")
        api, model = prepared.main_api, prepared.connection.model
        if kind in ("swipe", "continue"):
            stored = await self.load(chat_id)
            if not stored.messages or stored.messages[-1].data.get("is_user"):
                raise Conflict(f"there is no reply to {'swipe' if kind == 'swipe' else 'continue'}")
            entry = stored.messages[-1]
            message = Message.model_validate(entry.data)
            if kind == "continue":
                message.ensure_swipes()
                index = message.swipe_id or 0
                if not entry.data.get("swipes"):
                    await self.store.update_message(entry.id, message, owner=self.owner)
                await self.store.update_swipe_text(
                    entry.id, index, message.text, complete=False, owner=self.owner
                )
                return _Target(
                    "continue",
                    entry.id,
                    entry.position,
                    index,
                    index,
                    message,
                    prefix=message.text,
                    reasoning_prefix=message.extra.reasoning or "",
                )
            previous = message.swipe_id or 0
            now = self._now()
            info = {"send_date": now, "gen_started": now, "extra": {"api": api, "model": model}}
            index = await self.store.append_swipe(
                entry.id, "", info=info, activate=True, complete=False, owner=self.owner
            )
            fresh = Message.model_validate(
                (await self.store.get_message(entry.id, owner=self.owner)).data
            )
            return _Target("swipe", entry.id, entry.position, index, previous, fresh)
        message = self._reply_message(prepared.char_name, api, model)
        stored_message = await self.store.append_message(chat_id, message, owner=self.owner)
        await self.store.update_swipe_text(
            stored_message.id, 0, "", complete=False, owner=self.owner
        )
        return _Target("message", stored_message.id, stored_message.position, 0, None, message)

    async def _generate(
        self,
        chat_id: str,
        kind: str,
        controller: AbortController,
        abort: AbortSignal | None,
        sink: ResponseSink | None,
        prefill: str | None,
        stream: bool,
        overrides: Overrides,
        *,
        quiet_prompt: str = "",
        quiet_name: str | None = None,
        loud: bool = False,
    ) -> TurnOutcome:
        prepared = await prepare_turn(
            self.store,
            owner=self.owner,
            chat_id=chat_id,
            kind=kind,
            overrides=TurnOverrides.of(overrides),
            quiet_prompt=quiet_prompt,
            quiet_name=quiet_name,
            rng=self.rng,
            client=self.client,
            local_factory=self.local_factory,
            environ=self.environ,
        )
        await self._save_turn_state(chat_id, prepared)
        target = await self._target(chat_id, kind, prepared, loud)
        sinks: list[ResponseSink] = []
        store_sink: StoreSink | None = None
        if target.mode != "none":
            assert target.message_id is not None and target.message is not None
            store_sink = StoreSink(
                self.store,
                target.message_id,
                target.swipe_index or 0,
                target.message,
                owner=self.owner,
                prefix=target.prefix,
                reasoning_prefix=target.reasoning_prefix,
                min_interval=self.stream_interval,
            )
            sinks.append(store_sink)
        if sink is not None:
            sinks.append(sink)
        combined: ResponseSink = TeeSink(sinks)
        signals = AbortSignal.any(controller.signal, abort)
        names = (prepared.state.user_name,) if kind != "impersonate" else ()
        char = prepared.char_name if kind != "impersonate" else prepared.state.user_name
        processor = StreamingProcessor(model=prepared.connection.model)
        plan = await chat_plan(
            prepared.connection,
            self._plan_sources(),
            kind=kind,
            reasoning_template=prepared.state.reasoning,
            auto_parse_reasoning=prepared.state.settings.reasoning.auto_parse,
        )
        with self.tavern.generations.track(chat_id, controller, processor):
            result = await run_request(
                plan,
                prepared.request,
                combined,
                chat_id=chat_id,
                kind=kind,
                plugins=self.tavern.plugins,
                prefill=prefill or "",
                stream=stream,
                abort=signals,
                char_name=char,
                user_names=names,
            )
        processor.state = "finished" if result.status == "completed" else "failed"
        processor.text = result.text
        return await self._finish(chat_id, kind, prepared, target, result)

    def _plan_sources(self) -> PlanSources:
        environ = os.environ if self.environ is None else self.environ

        async def resolve(profile: ConnectionProfile) -> ResolvedConnection:
            return await resolve_profile(
                self.store,
                profile,
                owner=self.owner,
                client=self.client,
                local_factory=self.local_factory,
                environ=self.environ,
            )

        return PlanSources(self.store, self.owner, resolve, self.key_clock, environ)

    async def _save_turn_state(self, chat_id: str, prepared: PreparedTurn) -> None:
        """Variables set by the prompt's macros and the advanced timed world-info state: one
        metadata write, before the reply (SillyTavern saves them when the scan runs)."""
        chat = prepared.state.chat
        if chat is None:
            return
        metadata = chat.metadata.model_copy(deep=True)
        changed = False
        local = prepared.changed_local_variables()
        if local is not None:
            metadata.variables = dict(local)
            changed = True
        if prepared.wi is not None:
            before = metadata.timed_world_info.to_wire() if metadata.timed_world_info else None
            if prepared.wi.timed_state != (before or {"sticky": {}, "cooldown": {}}):
                metadata.timed_world_info = type(chat.timed_world_info).model_validate(
                    prepared.wi.timed_state
                )
                changed = True
        if changed:
            await self.store.update_chat_metadata(chat_id, metadata.to_wire(), owner=self.owner)
        await self._save_globals(prepared.variables, prepared.state.global_variables)

    async def _finish(
        self,
        chat_id: str,
        kind: str,
        prepared: PreparedTurn,
        target: _Target,
        result: TurnResult,
    ) -> TurnOutcome:
        text, reasoning = result.text, result.reasoning
        settings = prepared.state.settings.reasoning
        if not reasoning and settings.auto_parse and prepared.state.reasoning is not None:
            parsed = parse_reasoning(text, prepared.state.reasoning, strict=True)
            if parsed is not None and parsed.reasoning:
                text, reasoning = parsed.content, parsed.reasoning
        model = result.model or prepared.connection.model
        outcome: dict[str, Any] = {
            "kind": kind,
            "status": result.status,
            "text": text,
            "reasoning": reasoning,
            "model": model,
            "error": result.error,
            "result": result,
        }
        if target.mode == "none" or target.message is None or target.message_id is None:
            return TurnOutcome(**outcome)
        if not text and result.status != "completed":
            await self._discard(chat_id, target)
            return TurnOutcome(**outcome)
        message = target.message.model_copy(deep=True)
        if target.mode == "continue":
            text = _rejoin(target.prefix, text, result)
            message.mes = target.prefix + text
            if reasoning:
                message.extra.reasoning = target.reasoning_prefix + reasoning
        else:
            message.mes = text
            message.extra.reasoning = reasoning
            message.extra.reasoning_duration = None
            message.extra.model = model
        message.gen_finished = self._now()
        if result.notice is not None:
            _store_notice(message, result)
        if result.tool_invocations:
            message.extra.tool_invocations = [
                r.to_tool_invocation() for r in result.tool_invocations
            ]
        message.sync_to_swipe()
        await self.store.update_message(target.message_id, message, owner=self.owner)
        outcome["text"] = message.text
        return TurnOutcome(
            **outcome,
            message_index=target.position,
            message_id=target.message_id,
            swipe_index=target.swipe_index,
        )

    async def _discard(self, chat_id: str, target: _Target) -> None:
        """A turn that delivered nothing leaves no empty reply behind."""
        assert target.message_id is not None
        if target.mode == "message" and target.position is not None:
            await self.store.truncate_chat(chat_id, target.position, owner=self.owner)
        elif target.mode == "swipe" and target.swipe_index is not None:
            await self.store.delete_swipe(target.message_id, target.swipe_index, owner=self.owner)
            if target.previous_swipe is not None:
                await self.store.set_active_swipe(
                    target.message_id, target.previous_swipe, owner=self.owner
                )
        elif target.mode == "continue" and target.message is not None:
            await self.store.update_swipe_text(
                target.message_id,
                target.swipe_index or 0,
                target.prefix,
                complete=True,
                owner=self.owner,
            )


def _rejoin(prefix: str, text: str, result: TurnResult) -> str:
    """A continuation as the model wrote it: the runner drops the leading spaces of a text
    model's reply (noise for a fresh reply), but after a continued message the space the
    model put first is the word break between the old text and the new."""
    completion = result.completion
    if not prefix or not text or prefix[-1:].isspace() or text[:1].isspace():
        return text
    if completion is None or result.counters.continuations:
        return text  # stitched from several attempts: the runner already joined them
    raw = completion.text
    body = raw.lstrip(" \t")
    return raw[: len(raw) - len(body)] + text if body.startswith(text[:1]) else text


def _store_notice(message: Message, result: TurnResult) -> None:
    """Keep the fallback notice with the reply (our addition, so under ``extensions``): which
    model answered and which attempts failed, by error class and safe code only."""
    assert result.notice is not None
    extra = message.extra.to_wire()
    extensions = dict(extra.get("extensions") or {})
    extensions["fallback_notice"] = {**result.notice.to_json(), "text": result.notice.text()}
    message.extra = type(message.extra).model_validate({**extra, "extensions": extensions})


def _message_at(stored: StoredChat, index: int) -> Any:
    if not 0 <= index < len(stored.messages):
        raise NotFound(f"no message {index} in chat {stored.info.name!r}")
    return stored.messages[index]
