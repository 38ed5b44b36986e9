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

import os
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypedDict, Unpack

from tavernkit.chat.greetings import chat_name, greeting_message, iso_timestamp
from tavernkit.chat.plan import PlanSources, SharedRoute, chat_plan, pinned_reviewer_spec
from tavernkit.chat.prepare import (
    PreparedTurn,
    TurnOverrides,
    after_user_message,
    prepare_turn,
    resolve_profile,
)
from tavernkit.chat.reply import ReplyWriter, TurnOutcome, record_turn_error
from tavernkit.chat.review_setup import (
    chat_review,
    review_config,
    review_settings,
    set_chat_review,
)
from tavernkit.chat.run import ReshapeRequest, hooked_request, run_request
from tavernkit.chat.sink import TeeSink
from tavernkit.chat.slots import ChatSlots
from tavernkit.chat.tools import ChatTools, offer_tools
from tavernkit.errors import ChatTurnError, Conflict, GenerateTaskError, NotFound
from tavernkit.generation.abort import AbortController, AbortSignal, StreamingProcessor
from tavernkit.generation.profiles import LocalFactory, ResolvedConnection
from tavernkit.generation.review import ToolCheckpoint
from tavernkit.generation.sink import ResponseSink
from tavernkit.models.character import Card
from tavernkit.models.chat import ChatHeader, ChatMetadata, ImagePart, Message, TextPart
from tavernkit.models.profile import ConnectionProfile, ReviewSettings
from tavernkit.models.state import ChatState
from tavernkit.prompt.macros import may_hold_macros
from tavernkit.prompt.pipeline import begin
from tavernkit.providers.request import ChatPrompt
from tavernkit.runtime import Runtime
from tavernkit.store.chat_state import load_chat_state, load_user_name
from tavernkit.store.chat_window import windowed
from tavernkit.store.protocol import ChatInfo, Store, StoredChat
from tavernkit.text.variables import InMemoryVariables
from tavernkit.tools.loop import DEFAULT_MAX_ROUNDS
from tavernkit.tools.modes import resolve_function_call_mode

__all__ = ["ChatService", "TurnKeywords", "TurnOutcome"]

Overrides = TurnOverrides | Mapping[str, Any] | None


class TurnKeywords(TypedDict, total=False):
    """The keyword options every turn verb takes alike, declared once (each verb adds its
    own): ``stream`` (default true; false for :meth:`ChatService.quiet`), ``overrides`` (a
    :class:`~tavernkit.chat.prepare.TurnOverrides` or its mapping), ``sink`` (who else sees the
    reply's events), ``interrupt`` (stop a running turn of the chat instead of raising
    ``ChatBusy``) and ``abort``."""

    stream: bool
    overrides: Overrides
    sink: ResponseSink | None
    interrupt: bool
    abort: AbortSignal | None


_TURN_KEYWORDS = frozenset(TurnKeywords.__annotations__)


@dataclass(frozen=True, kw_only=True)
class _Turn:
    """One verb's call: its generation type and the options every verb passes alike."""

    kind: str
    interrupt: bool = False
    abort: AbortSignal | None = None
    sink: ResponseSink | None = None
    prefill: str | None = None
    stream: bool = True
    overrides: Overrides = None
    quiet_prompt: str = ""
    quiet_name: str | None = None
    loud: bool = False

    @classmethod
    def of(cls, kind: str, options: TurnKeywords, **own: Any) -> _Turn:
        """The turn of verb ``kind`` with the caller's ``options`` and the verb's ``own``; an
        option no verb takes is a ``TypeError`` naming it, as for any keyword."""
        unknown = sorted(set(options) - _TURN_KEYWORDS)
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) for {kind}: {', '.join(unknown)}")
        return cls(kind=kind, **own, **options)


class ChatService:
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

    def __init__(
        self,
        runtime: Runtime,
        *,
        clock: Callable[[], datetime] | None = None,
        new_id: Callable[[], str] | None = None,
        client: Any = None,
        local_factory: LocalFactory | None = None,
        environ: Mapping[str, str] | None = None,
        rng: Callable[[], float] | None = None,
        stream_interval: float = 0.2,
        key_clock: Callable[[], float] = time.time,
        function_call_mode: str = "auto",
        max_tool_rounds: int = DEFAULT_MAX_ROUNDS,
        tool_rng: random.Random | None = None,
        review_tool_checkpoint: ToolCheckpoint | None = None,
    ) -> None:
        if not isinstance(runtime, Runtime):
            # a Tavern here was the old call: say the new one rather than fail deep inside
            got = type(runtime).__name__
            raise TypeError(f"expected a Runtime, got {got}: use ChatService(tk.runtime, ...)")
        self.runtime = runtime
        self.clock = clock or (lambda: datetime.now(UTC))
        self.new_id = new_id or (lambda: str(uuid.uuid4()))
        self.client = client
        self.local_factory: LocalFactory = local_factory or runtime.local_models
        self.environ = environ
        self.rng = rng
        self.stream_interval = stream_interval
        self.key_clock = key_clock
        try:
            resolve_function_call_mode(function_call_mode, native_supported=True)  # checks it
        except GenerateTaskError as exc:  # the check is shared with tasks
            raise ChatTurnError.of(exc) from exc
        if max_tool_rounds < 1:
            raise ChatTurnError(
                "invalid_input",
                "max_tool_rounds must be at least 1",
                details={"field": "max_tool_rounds"},
            )
        self.function_call_mode = function_call_mode
        self.max_tool_rounds = max_tool_rounds
        self.tool_rng = tool_rng or random.Random()
        #: with response review on, the tool calls a model proposes pass this checkpoint
        #: before they run (approve/reject each; a rejection lasts for the turn)
        self.review_tool_checkpoint = review_tool_checkpoint
        #: the route this service's turns fall back to when every personal attempt failed (a
        #: server's shared profile: see :class:`~tavernkit.chat.plan.SharedRoute`)
        self.shared_route: SharedRoute | None = None
        self.slots = ChatSlots()

    @property
    def store(self) -> Store:
        return self.runtime.store

    @property
    def owner(self) -> str:
        return self.runtime.owner

    @property
    def replies(self) -> ReplyWriter:
        return ReplyWriter(self.store, self.owner, self._now)

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
        substitute = begin(state).substitute
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

    # -- editing -----------------------------------------------------------------------------

    async def edit(
        self, chat_id: str, message_index: int, text: str, *, reasoning: str | None = None
    ) -> Message:
        """Replace a message's text (its shown swipe too); ``reasoning`` edits its reasoning.
        An unfinished reply (:mod:`.incomplete`) is finished by the edit: mark and error go."""
        stored = await self.load(chat_id)
        entry = _message_at(stored, message_index)
        message = Message.model_validate(entry.data)
        message.mes = text
        record_turn_error(message, None)  # an edited reply is the user's, finished
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
        return self.runtime.generations.stop(chat_id) or stopped

    async def send(
        self,
        chat_id: str,
        text: str,
        *,
        attachments: Sequence[ImagePart | str] = (),
        prefill: str | None = None,
        **options: Unpack[TurnKeywords],
    ) -> TurnOutcome:
        """Store the user's message (``text`` plus image ``attachments``), then generate the
        character's reply. An empty ``text`` with no attachments just asks for a reply."""

        async def store_input(chat_id: str) -> ChatState | None:
            if text or attachments:
                overrides = options.get("overrides")
                return await self._store_user_message(chat_id, text, attachments, overrides)
            return None

        turn = _Turn.of("normal", options, prefill=prefill)
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
        turn = _Turn.of("swipe", options, prefill=prefill)
        return await self._turn(chat_id, turn)

    async def regenerate(
        self,
        chat_id: str,
        *,
        prefill: str | None = None,
        **options: Unpack[TurnKeywords],
    ) -> TurnOutcome:
        """Replace the last reply with a new one (its swipes go with it)."""

        async def drop_last_reply(chat_id: str) -> None:
            window = await self.store.load_chat_window(chat_id, last=1, owner=self.owner)
            if window.tail and not window.tail[-1].data.get("is_user"):
                if window.info.message_count == 1:
                    raise Conflict("the greeting cannot be regenerated; swipe it instead")
                await self.store.truncate_chat(chat_id, window.tail[-1].position, owner=self.owner)

        turn = _Turn.of("regenerate", options, prefill=prefill)
        return await self._turn(chat_id, turn, before=drop_last_reply)

    async def continue_(
        self,
        chat_id: str,
        **options: Unpack[TurnKeywords],
    ) -> TurnOutcome:
        """Extend the last reply; the new text is appended to its shown swipe. A model that
        starts by repeating the reply has that copy stripped, byte for byte (the matcher the
        turn runner uses for carried text), so the reply is never doubled."""
        turn = _Turn.of("continue", options)
        return await self._turn(chat_id, turn)

    async def impersonate(
        self,
        chat_id: str,
        **options: Unpack[TurnKeywords],
    ) -> TurnOutcome:
        """Write the user's next message. Nothing is stored: as in SillyTavern the text is a
        suggestion for the input box; send it with :meth:`send`."""
        turn = _Turn.of("impersonate", options)
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
        turn = _Turn.of(
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
    ) -> PreparedTurn:
        """The turn the next generation of ``kind`` would run (a dry run: nothing is stored,
        no timed effect advances). The plugins' request hooks run on it as in a turn, so
        ``request`` is what would be sent; ``built_request`` keeps the request as built when
        a hook changed it (see :func:`~tavernkit.chat.run.hooked_request`)."""
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
            renderer=self.runtime.prompt_renderer,
        )
        offer = await self._offer_tools(kind, prepared)
        if offer is not None:
            prepared = replace(prepared, request=offer.apply(prepared.request))
        request = hooked_request(self.runtime.plugins, chat_id, kind, prepared.request)
        if request is prepared.request:
            return prepared
        return replace(prepared, request=request, built_request=prepared.request)

    async def check_overrides(self, overrides: Overrides) -> TurnOverrides:
        """``overrides`` checked against the store before a turn writes anything: a profile or
        persona that does not exist is a :class:`~tavernkit.errors.ChatTurnError`
        (``invalid_input``, ``details["field"]`` naming it), so a mistyped name never leaves
        the user's message stored without a reply."""
        ov = TurnOverrides.of(overrides)
        for kind, field, ref in (
            ("connection_profile", "profile", ov.profile),
            ("persona", "persona", ov.persona),
        ):
            if not ref:
                continue
            try:
                await self.store.get_record(kind, ref, owner=self.owner)
            except NotFound:
                label = "connection profile" if field == "profile" else "persona"
                raise ChatTurnError(
                    "invalid_input",
                    f"no {label} named {ref!r}",
                    details={"field": field, "value": ref},
                ) from None
        return ov

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
    ) -> ChatState | None:
        """Store the user's message, its macros evaluated. Typed text without macros is stored
        as it is (the chat is not read); otherwise the chat's state is loaded to evaluate them,
        and returned as it is after the store (message appended, variables set), so the turn
        builds from it instead of loading it again."""
        ov = TurnOverrides.of(overrides)
        if not may_hold_macros(text):
            # Stored as typed: the chat, the card and the books are not read at all.
            user = await load_user_name(self.store, chat_id, owner=self.owner, persona=ov.persona)
            await self.store.append_message(
                chat_id, self._user_message(user, text, attachments), owner=self.owner
            )
            return None

        async def read(window: int) -> tuple[ChatState, InMemoryVariables, str]:
            state = await load_chat_state(
                self.store, owner=self.owner, chat_id=chat_id, persona=ov.persona, window=window
            )
            variables = InMemoryVariables(dict(state.local_variables), dict(state.global_variables))
            substitute = begin(state, compat=ov.compat, variables=variables).substitute
            return state, variables, substitute(text)

        state, variables, typed = await windowed(chat_id, read)
        message = self._user_message(state.user_name, typed, attachments)
        await self.store.append_message(chat_id, message, owner=self.owner)
        metadata = None
        if variables.local_vars != state.local_variables and state.chat is not None:
            metadata = state.chat.metadata.model_copy(deep=True)
            metadata.variables = variables.local_vars
            await self.store.update_chat_metadata(chat_id, metadata.to_wire(), owner=self.owner)
        await self._save_globals(variables, state.global_variables)
        return after_user_message(state, message, metadata, variables.global_vars)

    def _user_message(
        self, name: str, text: str, attachments: Sequence[ImagePart | str]
    ) -> Message:
        content: str | list[TextPart | ImagePart] = text
        if attachments:
            images = [a if isinstance(a, ImagePart) else ImagePart.from_url(a) for a in attachments]
            content = [*([TextPart(text=text)] if text else []), *images]
        return Message.new(name, content, is_user=True, send_date=self._now())

    async def _save_globals(self, variables: InMemoryVariables, before: Mapping[str, Any]) -> None:
        for name, value in variables.global_vars.items():
            if before.get(name) != value:
                await self.store.set_global_variable(name, value, owner=self.owner)

    async def _turn(
        self,
        chat_ref: str,
        turn: _Turn,
        *,
        before: Callable[[str], Awaitable[ChatState | None]] | None = None,
    ) -> TurnOutcome:
        """Every generating verb: take the chat's slot, run the verb's own first step
        (``before``: store the user's input, drop the reply being regenerated), then generate."""
        chat_id = await self._chat_id(chat_ref)
        await self.check_overrides(turn.overrides)
        async with self.slots.turn(chat_id, interrupt=turn.interrupt) as controller:
            state = await before(chat_id) if before is not None else None
            return await self._generate(chat_id, turn, controller, state)

    async def _generate(
        self,
        chat_id: str,
        turn: _Turn,
        controller: AbortController,
        state: ChatState | None = None,
    ) -> TurnOutcome:
        kind = turn.kind
        prepared = await prepare_turn(
            self.store,
            owner=self.owner,
            chat_id=chat_id,
            kind=kind,
            overrides=TurnOverrides.of(turn.overrides),
            quiet_prompt=turn.quiet_prompt,
            quiet_name=turn.quiet_name,
            state=state,
            rng=self.rng,
            client=self.client,
            local_factory=self.local_factory,
            environ=self.environ,
            renderer=self.runtime.prompt_renderer,
        )
        await self._save_turn_state(chat_id, prepared)
        offer = await self._offer_tools(kind, prepared)
        request = offer.apply(prepared.request) if offer is not None else prepared.request
        replies = self.replies
        target = await replies.open(chat_id, kind, prepared, turn.loud)
        store_sink = replies.sink(target, self.stream_interval)
        sinks = [s for s in (store_sink, turn.sink) if s is not None]
        signals = AbortSignal.any(controller.signal, turn.abort)
        names = (prepared.state.user_name,) if kind != "impersonate" else ()
        char = prepared.char_name if kind != "impersonate" else prepared.state.user_name
        processor = StreamingProcessor(model=prepared.connection.model)
        sources = self._plan_sources()
        settings = review_settings(prepared)
        pinned = None
        if settings is not None and settings.reviewer_profile:
            pinned = await pinned_reviewer_spec(
                sources, settings.reviewer_profile, settings.reviewer_model
            )
        review = (
            review_config(
                prepared,
                request,
                pinned[0] if pinned else None,
                tool_checkpoint=self.review_tool_checkpoint,
            )
            if settings is not None
            else None
        )
        plan = await chat_plan(
            prepared.connection,
            sources,
            kind=kind,
            reasoning_template=prepared.state.reasoning,
            auto_parse_reasoning=prepared.state.settings.reasoning.auto_parse,
            seed=_turn_seed(chat_id, prepared),
            reviewer=pinned,
        )
        if offer is not None:
            offer.attach(plan)
        with self.runtime.generations.track(chat_id, controller, processor):
            result = await run_request(
                plan,
                request,
                TeeSink(sinks),
                chat_id=chat_id,
                kind=kind,
                plugins=self.runtime.plugins,
                prefill=turn.prefill or "",
                stream=turn.stream,
                abort=signals,
                char_name=char,
                user_names=names,
                tools=offer.tools if offer is not None else (),
                max_tool_rounds=self.max_tool_rounds,
                continues=target.prefix if kind == "continue" else "",
                review=review,
                source=prepared.connection.source,
                reshape=_reshape(prepared, offer),
            )
        processor.state = "finished" if result.status == "completed" else "failed"
        processor.text = result.text
        return await replies.finish(chat_id, kind, prepared, target, result)

    async def _offer_tools(self, kind: str, prepared: PreparedTurn) -> ChatTools | None:
        return await offer_tools(
            self.runtime.tools,
            kind,
            prepared.connection,
            mode=self.function_call_mode,
            rng=self.tool_rng,
        )

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

        return PlanSources(
            self.store,
            self.owner,
            resolve,
            self.key_clock,
            environ,
            self.runtime.key_cooldowns,
            shared=self.shared_route,
        )

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


def _turn_seed(chat_id: str, prepared: PreparedTurn) -> str:
    """The randomizer's seed of this turn: the chat and the turn's place in it (messages so
    far, and the swipes of the last one, so a swipe draws afresh while one turn's draw
    is reproducible)."""
    messages = prepared.state.messages
    swipes = len(messages[-1].swipes or ()) if messages else 0
    return f"{chat_id}:{len(messages)}:{swipes}"


def _message_at(stored: StoredChat, index: int) -> Any:
    if not 0 <= index < len(stored.messages):
        raise NotFound(f"no message {index} in chat {stored.info.name!r}")
    return stored.messages[index]


def _reshape(prepared: PreparedTurn, offer: ChatTools | None) -> ReshapeRequest:
    """The turn's request remade from the blocks for a fallback attempt on another source."""

    def reshape(source: str) -> ChatPrompt:
        request = prepared.request_for(source)
        if offer is not None:
            request = offer.apply(request)
        assert isinstance(request, ChatPrompt)  # only chat prompts are reshaped
        return request

    return reshape
