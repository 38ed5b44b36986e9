"""What every chat turn verb shares (:class:`TurnCore`, the base of
:class:`~tavernkit.chat.service.ChatService`): the service's parts and settings, the chat's
slot, the user's stored input (:mod:`.user_input`), and one generation from prepare to the
finished reply — prepare (:mod:`.prepare`), plan (:mod:`.plan`), run (:mod:`.run`), finish
(:mod:`.reply`).
After a completed reply that was stored, the owner's memory embeds it in the background and
``after_reply`` (the facade's rolling summary) runs outside the turn's slot."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypedDict, Unpack

from tavernkit.chat.deps import TurnDeps
from tavernkit.chat.greetings import iso_timestamp
from tavernkit.chat.group_turn import refuse_group_chat
from tavernkit.chat.memory_setup import ChatMemory
from tavernkit.chat.plan import (
    PinnedReviewerSpec,
    PlanSources,
    SharedRoute,
    chat_plan,
    pinned_reviewer_spec,
)
from tavernkit.chat.prepare import (
    PreparedTurn,
    TurnDraft,
    TurnOverrides,
    prepare_turn,
)
from tavernkit.chat.reply import (
    OpeningReply,
    ReplyTarget,
    ReplyWriter,
    TurnOutcome,
    continue_postfix,
    reply_mode,
)
from tavernkit.chat.review_setup import review_config, review_settings
from tavernkit.chat.run import ChatRequest, ReshapeRequest, run_request
from tavernkit.chat.sink import ContinuationJoin, TeeSink
from tavernkit.chat.slots import ChatSlots
from tavernkit.chat.tools import ChatTools, offer_tools
from tavernkit.chat.turn_options import Overrides, TurnCall
from tavernkit.chat.user_input import UserInput, UserInputWriter
from tavernkit.chat.writer import check_writer_usable
from tavernkit.errors import ChatTurnError, GenerateTaskError, NotFound
from tavernkit.generation.abort import AbortController, AbortSignal, StreamingProcessor
from tavernkit.generation.options import TurnOptions
from tavernkit.generation.profiles import LocalFactory, ResolvedConnection
from tavernkit.generation.review import ReviewConfig, ToolCheckpoint
from tavernkit.generation.rule_checker import McpRuleChecker
from tavernkit.generation.sink import ResponseSink
from tavernkit.models.character import Card, Character
from tavernkit.models.profile import ConnectionProfile
from tavernkit.models.settings import Settings
from tavernkit.providers.request import ChatPrompt, PromptRequest
from tavernkit.run_to_end import run_to_end
from tavernkit.runtime import PooledClient, Runtime
from tavernkit.store.protocol import Store
from tavernkit.tools.loop import DEFAULT_MAX_ROUNDS
from tavernkit.tools.modes import resolve_function_call_mode

__all__ = ["ServiceOptions", "TurnCore"]


class ServiceOptions(TypedDict, total=False):
    """The chat service's keyword options (what each does: :class:`~.service.ChatService`)."""

    clock: Callable[[], datetime] | None
    new_id: Callable[[], str] | None
    client: Any
    local_factory: LocalFactory | None
    environ: Mapping[str, str] | None
    rng: Callable[[], float] | None
    stream_interval: float
    key_clock: Callable[[], float]
    function_call_mode: str
    max_tool_rounds: int
    tool_rng: random.Random | None
    review_tool_checkpoint: ToolCheckpoint | None


class TurnCore:
    """The parts and steps the chat verbs share; the verbs are :class:`~.service.ChatService`'s
    (its docstring says what each constructor argument does)."""

    def __init__(self, runtime: Runtime, **options: Unpack[ServiceOptions]) -> None:
        if not isinstance(runtime, Runtime):
            # a Tavern here was the old call: say the new one rather than fail deep inside
            got = type(runtime).__name__
            raise TypeError(f"expected a Runtime, got {got}: use ChatService(tk.runtime, ...)")
        unknown = sorted(set(options) - set(ServiceOptions.__annotations__))
        if unknown:
            raise TypeError(f"ChatService() got an unexpected keyword argument {unknown[0]!r}")
        o = ServiceOptions(**options)
        client = o.get("client")
        environ = o.get("environ")
        self.runtime = runtime
        self.clock = o.get("clock") or (lambda: datetime.now(UTC))
        self.new_id = o.get("new_id") or (lambda: str(uuid.uuid4()))
        self._client = client
        self.local_factory: LocalFactory = o.get("local_factory") or runtime.local_models
        self.environ = environ
        self.rng = o.get("rng")
        self.stream_interval = o.get("stream_interval", 0.2)
        self.key_clock = o.get("key_clock", time.time)
        function_call_mode = o.get("function_call_mode", "auto")
        max_tool_rounds = o.get("max_tool_rounds", DEFAULT_MAX_ROUNDS)
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
        #: the owner's memory settings applied to every turn (vectors, summary injection)
        self.memory = ChatMemory(runtime, client=client, environ=environ)
        #: awaited after each completed reply that was stored (the facade's: the summary),
        #: with the settings the turn was built with (``None``: it was not built)
        self.after_reply: Callable[[str, Settings | None], Awaitable[None]] | None = None
        #: chat -> the settings its running turn was built with, for ``after_reply`` (a
        #: store read fewer after each reply)
        self._built_with: dict[str, Settings] = {}
        self.tool_rng = o.get("tool_rng") or random.Random()
        #: with response review on, the tool calls a model proposes pass this checkpoint
        #: before they run (approve/reject each; a rejection lasts for the turn)
        self.review_tool_checkpoint = o.get("review_tool_checkpoint")
        #: the route this service's turns fall back to when every personal attempt failed (a
        #: server's shared profile: see :class:`~tavernkit.chat.plan.SharedRoute`)
        self.shared_route: SharedRoute | None = None
        self.slots = ChatSlots()

    #: the HTTP client provider calls run on: the one given, else the Tavern's pool
    client = PooledClient()

    @property
    def store(self) -> Store:
        return self.runtime.store

    @property
    def owner(self) -> str:
        return self.runtime.owner

    @property
    def replies(self) -> ReplyWriter:
        return ReplyWriter(self.store, self.owner, self._now)

    @property
    def inputs(self) -> UserInputWriter:
        return UserInputWriter(self.store, self.owner, self._now)

    def turn_deps(self) -> TurnDeps:
        """The parts this service's turn stages share (:class:`~.deps.TurnDeps`), with the
        HTTP client of the running event loop."""
        runtime = self.runtime
        return TurnDeps(
            store=runtime.store,
            owner=runtime.owner,
            client=self.client,
            local_factory=self.local_factory,
            environ=self.environ,
            sources=runtime.provider_sources,
            renderer=runtime.prompt_renderer,
            memory=self.memory,
            plugins=runtime.plugins,
            rng=self.rng,
        )

    def _now(self) -> str:
        return iso_timestamp(self.clock())

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

    async def check_writer(self, character: str | None, overrides: Overrides) -> None:
        """The writer of ``character`` (a stored character's id or name; ``None``: none)
        checked before a turn writes anything: a profile that is missing or cannot be used,
        or a missing preset, is a :class:`~tavernkit.errors.ChatTurnError` naming it
        (:func:`~.writer.check_writer_usable`), so the user's message is not stored for a
        turn that could not run. A turn that names its own ``profile`` does not use the
        writer's."""
        if character is None or TurnOverrides.of(overrides).profile:
            return
        try:
            # the shared (revision-checked) record the turn's own load reads next: no second
            # parse of the card, and on SQLite no statement at all while nothing was written
            shared = await self.store.get_shared_record("character", character, owner=self.owner)
        except NotFound:
            return  # the turn's own load says so
        data = shared.model.data if isinstance(shared.model, Card) else None
        await self.check_card_writer(data, overrides)

    async def check_card_writer(self, character: Character | None, overrides: Overrides) -> None:
        """:meth:`check_writer` for a card's ``data`` already loaded (a group member's)."""
        if TurnOverrides.of(overrides).profile:
            return
        deps = self.turn_deps()
        await check_writer_usable(self.store, character, deps.resolve, owner=self.owner)

    # -- internals ---------------------------------------------------------------------------

    async def _chat_id(self, ref: str) -> str:
        info = await self.store.get_chat_info(ref, owner=self.owner)
        return info.id

    async def _turn(
        self,
        chat_ref: str,
        turn: TurnCall,
        *,
        before: Callable[[str], Awaitable[UserInput | None]] | None = None,
    ) -> TurnOutcome:
        """Every generating verb: take the chat's slot, run the verb's own first step
        (``before``: store the user's input, drop the reply being regenerated), then generate.
        A group chat's turns are :meth:`group_turn`'s: a solo verb there is a ``Conflict``."""
        if turn.checked is not None:  # the caller read and checked it just before
            chat_id = turn.checked.id
        else:
            info = await self.store.get_chat_info(chat_ref, owner=self.owner)
            chat_id = info.id
            if info.character_id is None:  # only a chat with no character can be a group's
                await refuse_group_chat(self.store, info.name, owner=self.owner)
            await self.check_overrides(turn.overrides)
            await self.check_writer(info.character_id, turn.overrides)
        async with self.slots.turn(chat_id, interrupt=turn.interrupt) as controller:
            try:
                given = await before(chat_id) if before is not None else None
                outcome = await self._generate(chat_id, turn, controller, given)
            finally:
                settings = self._built_with.pop(chat_id, None)
        stored = turn.loud or turn.kind not in ("quiet", "impersonate")
        if outcome.status == "completed" and stored:
            self.memory.after_reply(chat_id, owner=self.owner)  # embeds in the background
            if self.after_reply is not None:
                await self.after_reply(chat_id, settings)  # the summary, outside the slot
        return outcome

    async def _generate(
        self,
        chat_id: str,
        turn: TurnCall,
        controller: AbortController,
        given: UserInput | None = None,
    ) -> TurnOutcome:
        kind = turn.kind
        pending = [given.unwritten] if given is not None and given.unwritten is not None else []

        async def write_input() -> None:
            # the user's message on its own: the turn failed before the reply's place was
            # stored (the message is never lost), or a build reloads the chat from the store
            while pending:
                message = pending.pop()
                await run_to_end(self.store.append_message(chat_id, message, owner=self.owner))

        try:
            prepared, offer = await self._prepare(chat_id, turn, given, write_input)
        except BaseException:
            await write_input()
            raise
        before = pending.pop() if pending else None
        placing = self.replies.open(
            chat_id, kind, prepared, turn.loud, speaker=turn.member, before=before
        )
        if reply_mode(kind, turn.loud) != "message":
            # A swipe or continue opens first: it may find no reply to extend (a Conflict
            # that must cost no upstream call), and a continue's request needs the prefix.
            target = await placing
            return await self._run(chat_id, turn, controller, prepared, offer, target)
        # a new reply's request goes out while its place is stored; a place that cannot be
        # stored stops the request at once (and the turn raises the store's error)
        opening = OpeningReply(placing)
        opening.on_failure(lambda exc: controller.abort("the reply's place was not stored"))
        try:
            return await self._run(chat_id, turn, controller, prepared, offer, opening)
        except BaseException:
            if before is not None and opening.failed():
                # the place's transaction held the user's message too: it is stored alone
                pending.append(before)
                with contextlib.suppress(Exception):
                    await write_input()
            raise

    async def _prepare(
        self,
        chat_id: str,
        turn: TurnCall,
        given: UserInput | None,
        before_reload: Callable[[], Awaitable[None]],
    ) -> tuple[PreparedTurn, ChatTools | None]:
        """The turn's prompt and request built, its state saved, its tools chosen: as soon as
        the connection is resolved, in a task of their own (the MCP servers are a store read),
        so the choice overlaps the prompt's build."""
        kind = turn.kind
        early: list[tuple[ResolvedConnection, asyncio.Task[ChatTools | None]]] = []

        async def choose_tools(connection: ResolvedConnection) -> None:
            if not early:  # a redone build resolves the profile again: chosen once
                early.append(
                    (connection, asyncio.ensure_future(self._offer_tools(kind, connection)))
                )
                # one pass of the loop: the task sends its store read before the build (which
                # holds the loop) starts; the read then runs on the store's side meanwhile
                await asyncio.sleep(0)

        try:
            prepared = await self._build(chat_id, turn, given, before_reload, choose_tools)
            self._built_with[chat_id] = prepared.state.settings
            await self._save_turn_state(chat_id, prepared)
            if early and _same_tools(early[0][0], prepared.connection):
                return prepared, await early.pop()[1]
            return prepared, await self._offer_tools(kind, prepared.connection)
        finally:
            for _, task in early:  # a failed turn's, or one chosen for another connection
                if task.done() and not task.cancelled():
                    task.exception()  # seen: the turn has its own error, or needs none
                task.cancel()

    async def _build(
        self,
        chat_id: str,
        turn: TurnCall,
        given: UserInput | None,
        before_reload: Callable[[], Awaitable[None]],
        on_connection: Callable[[ResolvedConnection], Awaitable[None]] | None = None,
    ) -> PreparedTurn:
        draft = TurnDraft(
            chat_id,
            turn.kind,
            TurnOverrides.of(turn.overrides),
            quiet_prompt=turn.quiet_prompt,
            quiet_name=turn.quiet_name,
            character=turn.member.character_id if turn.member else None,
            group=turn.member.context if turn.member else None,
        )
        return await prepare_turn(
            self.turn_deps(),
            draft,
            state=given.state if given is not None else None,
            before_reload=before_reload,
            on_connection=on_connection,
        )

    async def _run(
        self,
        chat_id: str,
        turn: TurnCall,
        controller: AbortController,
        prepared: PreparedTurn,
        offer: ChatTools | None,
        target: ReplyTarget | OpeningReply,
    ) -> TurnOutcome:
        """Generate into the reply's stored place (``target``: a new reply's, still being
        stored), and finish it."""
        kind = turn.kind
        request = offer.apply(prepared.request) if offer is not None else prepared.request
        replies = self.replies
        store_sink = replies.sink(target, self.stream_interval)
        sinks = [s for s in (store_sink, turn.sink) if s is not None]
        signals = AbortSignal.any(controller.signal, turn.abort)
        names = (prepared.state.user_name,) if kind != "impersonate" else ()
        if turn.member is not None:
            names = (*names, *turn.member.others)  # a member's reply ends where another's starts
        char = prepared.char_name if kind != "impersonate" else prepared.state.user_name
        processor = StreamingProcessor(model=prepared.connection.model)
        sources = self._plan_sources()
        pinned, review = await self._review_of(prepared, request, sources)
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
                self.turn_deps(),
                plan,
                ChatRequest(
                    request,
                    chat_id,
                    kind,
                    prefill=turn.prefill or "",
                    source=prepared.connection.source,
                    reshape=_reshape(prepared, offer),
                ),
                _joined(TeeSink(sinks), target, continue_postfix(prepared)),
                TurnOptions(
                    stream=turn.stream,
                    char_name=char,
                    user_names=names,
                    continues=target.prefix if isinstance(target, ReplyTarget) else "",
                    tools=tuple(offer.tools) if offer is not None else (),
                    max_tool_rounds=self.max_tool_rounds,
                    review=review,
                ),
                signals,
            )
        processor.state = "finished" if result.status == "completed" else "failed"
        processor.text = result.text
        if isinstance(target, OpeningReply):
            target = await target.target()  # raises the store's error when it failed
        return await replies.finish(chat_id, kind, prepared, target, result)

    async def _review_of(
        self, prepared: PreparedTurn, request: PromptRequest, sources: PlanSources
    ) -> tuple[PinnedReviewerSpec | None, ReviewConfig | None]:
        """The turn's reviewer pinned to its profile (or none) and the review's settings (none
        when the turn is not reviewed)."""
        settings = review_settings(prepared)
        if settings is None:
            return None, None
        pinned = None
        # an inherited reviewer is a side task: on the utility profile, when one is set
        utility = prepared.state.settings.selections.utility_profile
        reviewer = settings.reviewer_profile or utility
        if reviewer:
            pinned = await pinned_reviewer_spec(sources, reviewer, settings.reviewer_model)
        review = review_config(
            prepared,
            request,
            pinned[0] if pinned else None,
            tool_checkpoint=self.review_tool_checkpoint,
            rule_checker=McpRuleChecker(self.runtime.mcp),
        )
        return pinned, review

    async def _offer_tools(self, kind: str, connection: ResolvedConnection) -> ChatTools | None:
        return await offer_tools(
            self.runtime.tools,
            kind,
            connection,
            mode=self.function_call_mode,
            rng=self.tool_rng,
        )

    def _plan_sources(self) -> PlanSources:
        environ = os.environ if self.environ is None else self.environ

        deps = self.turn_deps()

        async def resolve(profile: ConnectionProfile) -> ResolvedConnection:
            return await deps.resolve(profile)

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
        await self.inputs.save_globals(prepared.variables, prepared.state.global_variables)


def _turn_seed(chat_id: str, prepared: PreparedTurn) -> str:
    """The randomizer's seed of this turn: the chat and the turn's place in it (messages so
    far, and the swipes of the last one, so a swipe draws afresh while one turn's draw
    is reproducible)."""
    messages = prepared.state.messages
    swipes = len(messages[-1].swipes or ()) if messages else 0
    return f"{chat_id}:{len(messages)}:{swipes}"


def _reshape(prepared: PreparedTurn, offer: ChatTools | None) -> ReshapeRequest:
    """The turn's request remade from the blocks for a fallback attempt on another source."""

    def reshape(source: str) -> ChatPrompt:
        request = prepared.request_for(source)
        if offer is not None:
            request = offer.apply(request)
        assert isinstance(request, ChatPrompt)  # only chat prompts are reshaped
        return request

    return reshape


def _same_tools(chosen_for: ResolvedConnection, connection: ResolvedConnection) -> bool:
    """Whether the tools chosen for ``chosen_for`` are the ones ``connection`` offers (what
    :func:`~tavernkit.chat.tools.offer_tools` reads of a connection)."""
    return chosen_for is connection or (
        chosen_for.family == connection.family
        and chosen_for.capabilities == connection.capabilities
    )


def _joined(sink: TeeSink, target: ReplyTarget | OpeningReply, postfix: str) -> ResponseSink:
    """The turn's sink; a continuation's joins its first piece to the continued message."""
    if isinstance(target, ReplyTarget) and target.mode == "continue" and target.prefix and postfix:
        return ContinuationJoin(sink, target.prefix, postfix)
    return sink
