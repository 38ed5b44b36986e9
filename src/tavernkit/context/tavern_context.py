"""``TavernContext``, the plugin context (see :mod:`tavernkit.context`)."""

from __future__ import annotations

import copy
import dataclasses
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypedDict, TypeVar, Unpack

import httpx2

from tavernkit.chat.plan import PlanSources, SharedRoute, task_plan
from tavernkit.chat.profile_preset import load_bound_preset
from tavernkit.chat.slots import ChatSlots
from tavernkit.context.connection_profiles import ConnectionProfiles
from tavernkit.context.group_quiet import group_quiet_state, is_group_chat
from tavernkit.context.prompt_preview import (
    build_preset_aware_prompt_messages,
    resolve_world_info_for_messages,
)
from tavernkit.context.raw_generation import (
    QuietOptions,
    RawOptions,
    generate_quiet_prompt,
    generate_raw,
    generate_raw_data,
)
from tavernkit.context.request_primitives import (
    ChatCompletionService,
    ConnectionManagerRequestService,
    StreamChunk,
    TextCompletionService,
    send_chat_request,
    send_generation_request,
    send_streaming_request,
)
from tavernkit.context.windowed_calls import in_window, task_stream_in_window
from tavernkit.errors import GenerateTaskError, NotFound
from tavernkit.generation.abort import AbortSignal, StreamingProcessor
from tavernkit.generation.attempt.sending import BeforeRequest
from tavernkit.generation.hooks import RequestScope, before_request_hook
from tavernkit.generation.plan import Plan
from tavernkit.generation.profiles import (
    EMBEDDED_PROFILE,
    LocalFactory,
    ResolvedConnection,
    resolve_connection,
)
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.profile import ConnectionProfile
from tavernkit.models.state import ChatState
from tavernkit.providers.retry import RetryPolicy
from tavernkit.runtime import PooledClient, Runtime
from tavernkit.store.chat_state import load_chat_state
from tavernkit.tasks.options import TaskKeywords, TaskOptions, TaskResult, TaskStream
from tavernkit.tasks.run import TaskServices, run_task
from tavernkit.tools.capability import ToolCapabilities
from tavernkit.tools.capability import (
    can_perform_tool_calls as _can_perform,
)
from tavernkit.tools.capability import (
    is_tool_calling_supported as _supported,
)
from tavernkit.tools.loop import ToolLoopResult
from tavernkit.tools.loop import run_tool_loop as _run_tool_loop
from tavernkit.tools.registry import FunctionTool, ToolAction, ToolRegistry, tools_from_specs
from tavernkit.worldinfo.result import WorldInfoResult

__all__ = ["ConnectionProfiles", "ContextOptions", "LoudChats", "TavernContext"]

_T = TypeVar("_T")
_UNSEEDED = random.Random()  # shared: seeding one per context read the OS entropy


class LoudChats(Protocol):
    """What the context needs of the chat service (which owns every write to a chat): its
    turn slots and the appending of a reply (``generate_quiet_prompt(quiet_to_loud=True)``),
    and the shared route its turns may fall back to (a server sets it per user: a task falls
    back where a chat turn would)."""

    slots: ChatSlots
    shared_route: SharedRoute | None

    async def append_reply(
        self, chat_id: str, text: str, *, reasoning: str = "", model: str | None = None
    ) -> int: ...


class ContextOptions(TypedDict, total=False):
    """:class:`TavernContext`'s keyword options, its injection points (what each does: its
    docstring); ``chats`` is the Tavern's chat service, ``before_request`` a hook on each
    provider request, ``side_task`` a context for side tasks
    (:meth:`TavernContext.for_side_tasks`)."""

    chats: LoudChats | None
    client: httpx2.AsyncClient | None
    retry: RetryPolicy | None
    rng: random.Random | None
    local_factory: LocalFactory | None
    environ: Mapping[str, str] | None
    before_request: BeforeRequest | None
    key_clock: Callable[[], float]
    fallbacks: bool
    side_task: bool


class TavernContext:
    """The per-chat view of a Tavern's :class:`~tavernkit.runtime.Runtime` (see the module
    docstring).

    ``client`` (an ``httpx2.AsyncClient``), ``retry``, ``rng``, ``local_factory``,
    ``environ`` and ``key_clock`` (epoch seconds, for key cooldowns) are injection points for
    servers and tests. Every generation call runs the chat turn's plan on its profile (key
    pool, cooldowns shared with the chats of the Tavern, fallback chain); with
    ``fallbacks=False`` it runs on the profile alone (its key pool, but neither its fallback
    chain nor a shared route: what a connection test asks).
    """

    GenerateTaskError = GenerateTaskError

    def __init__(
        self,
        runtime: Runtime,
        chat_id: str | None = None,
        **options: Unpack[ContextOptions],
    ) -> None:
        if not isinstance(runtime, Runtime):
            # a Tavern here was the old call: say the new one rather than fail deep inside
            got = type(runtime).__name__
            raise TypeError(
                f"expected a Runtime, got {got}: use tk.context(chat_id) "
                "or TavernContext(tk.runtime, ...)"
            )
        unknown = sorted(set(options) - set(ContextOptions.__annotations__))
        if unknown:
            raise TypeError(f"TavernContext() got an unexpected keyword argument {unknown[0]!r}")
        o = options
        self.runtime = runtime
        self._chats = o.get("chats")
        self.chat_id = chat_id
        self._client = o.get("client")
        self.retry = o.get("retry") or RetryPolicy()
        self.rng = o.get("rng") or _UNSEEDED
        # the Tavern's shared embedded model unless one is injected: loaded once per process
        self.local_factory: LocalFactory = o.get("local_factory") or runtime.local_models
        self.environ = o.get("environ")
        self.before_request = o.get("before_request")
        self.key_clock = o.get("key_clock", time.time)
        self.fallbacks = o.get("fallbacks", True)
        #: a side task's context: a call naming no profile runs on the utility profile
        self.side_task = o.get("side_task", False)
        self.connection_profiles = ConnectionProfiles(self)

    def for_side_tasks(self) -> TavernContext:
        """This context for side tasks (summaries, review, ``generate_task(side_task=True)``):
        a call naming no profile runs on the utility profile (``PATCH /settings/selections``
        ``utility_profile``) so it spends neither the main model's keys nor its budget; with
        no utility profile set, on the selected one as every call does."""
        if self.side_task:
            return self
        twin = copy.copy(self)
        twin.side_task = True
        twin.connection_profiles = ConnectionProfiles(twin)
        return twin

    # -- collaborators -----------------------------------------------------------------------
    client = PooledClient()  # provider calls' HTTP client: the one given, else the Tavern's pool

    @property
    def tools(self) -> ToolRegistry:
        return self.runtime.tools

    async def chat_state(self) -> ChatState:
        """Everything a turn of this context reads, loaded now."""
        runtime = self.runtime
        return await load_chat_state(runtime.store, owner=runtime.owner, chat_id=self.chat_id)

    async def _profile(self, name: str) -> ConnectionProfile | None:
        if name:
            profile = await self.connection_profiles.get(name)
            if profile is None:
                raise GenerateTaskError(
                    "invalid_input",
                    f"no connection profile named {name!r}",
                    details={"field": "api_preset_name", "value": name},
                )
            return profile
        settings = await self.runtime.settings()
        utility = settings.selections.utility_profile if self.side_task else None
        if utility:
            profile = await self.connection_profiles.get(utility)
            if profile is None:
                raise GenerateTaskError(
                    "invalid_input",
                    f"the utility profile {utility!r} is not stored (set another or none in "
                    "the settings)",
                    details={"field": "utility_profile", "value": utility},
                )
            return profile
        selected = settings.selections.profile
        return await self.connection_profiles.get(selected) if selected else None

    async def resolve_named(
        self,
        name: str,
        model_override: str = "",
        api_settings_override: Mapping[str, Any] | ConnectionProfile | None = None,
    ) -> ResolvedConnection:
        return await self._resolve(
            await self._profile(name),
            model_override=model_override,
            api_settings_override=api_settings_override,
        )

    async def _resolve(
        self,
        profile: ConnectionProfile | None,
        *,
        model_override: str = "",
        api_settings_override: Mapping[str, Any] | ConnectionProfile | None = None,
    ) -> ResolvedConnection:
        store, owner = self.runtime.store, self.runtime.owner

        async def load_secret(key_id: str) -> str:
            return await store.get_api_key_secret(key_id, owner=owner)

        return await resolve_connection(
            profile,
            model_override=model_override,
            api_settings_override=api_settings_override,
            load_secret=load_secret,
            client=self.client,
            local_factory=self.local_factory,
            environ=self.environ,
            sources=self.runtime.provider_sources,
        )

    async def plan_for(self, connection: ResolvedConnection) -> Plan:
        """The plan a generation on ``connection`` runs: the chat turn's (key pool with the
        Tavern's cooldowns, fallback chain, and the chat service's shared route, if any), see
        :func:`tavernkit.chat.plan.task_plan`. Without ``fallbacks``: the profile's key pool
        alone."""

        runtime = self.runtime
        shared = self._chats.shared_route if self._chats is not None else None
        if not self.fallbacks:
            shared = None
            alone = connection.profile.model_copy(update={"fallback_chain": None})
            connection = dataclasses.replace(connection, profile=alone)
        sources = PlanSources(
            runtime.store,
            runtime.owner,
            self._resolve,
            self.key_clock,
            os.environ if self.environ is None else self.environ,
            runtime.key_cooldowns,
            shared=shared,
        )
        return await task_plan(connection, sources)

    async def preset_named(self, name: str) -> ChatCompletionPreset | None:
        store, owner = self.runtime.store, self.runtime.owner
        try:
            preset = await store.get("chat_preset", name, owner=owner)
        except NotFound:
            raise GenerateTaskError(
                "invalid_input",
                f"no chat-completion preset named {name!r}",
                details={"field": "llm_preset_name", "value": name},
            ) from None
        return preset if isinstance(preset, ChatCompletionPreset) else None

    async def bound_preset(self, connection: ResolvedConnection) -> ChatCompletionPreset | None:
        """The chat-completion preset bound to ``connection``'s profile, if any."""
        return await load_bound_preset(self.runtime.store, connection, owner=self.runtime.owner)

    def request_hooks(self, scope: RequestScope = "extension_internal") -> BeforeRequest | None:
        """The context's own ``before_request`` then the plugins' hooks, for ``scope``
        (``generate_task`` and the lower-level calls are always ``extension_internal``)."""
        return before_request_hook(self.runtime.plugins, scope, own=self.before_request)

    def _in_window(
        self, run: Callable[[TaskServices], Awaitable[_T]], *, api_settings_override: Any = None
    ) -> Awaitable[_T]:
        """``run`` on services over the chat's newest messages (:mod:`.windowed_calls`)."""

        def services(window: int | None) -> TaskServices:
            return self._services(api_settings_override=api_settings_override, window=window)

        return in_window(self.chat_id, self.rng, services, run)

    def _services(
        self, *, api_settings_override: Any = None, window: int | None = None
    ) -> TaskServices:
        async def connection(name: str, model_override: str) -> ResolvedConnection:
            return await self.resolve_named(name, model_override, api_settings_override)

        async def group_state(force: int | str | None) -> ChatState | None:
            runtime = self.runtime
            return await group_quiet_state(runtime.store, self.chat_id, force, owner=runtime.owner)

        async def windowed_state() -> ChatState:
            runtime = self.runtime
            return await load_chat_state(
                runtime.store, owner=runtime.owner, chat_id=self.chat_id, window=window
            )

        return TaskServices(
            load_state=self.chat_state if window is None else windowed_state,
            load_group_state=group_state,
            resolve_connection=connection,
            load_preset=self.preset_named,
            generations=self.runtime.generations,
            chat_id=self.chat_id,
            retry=self.retry,
            rng=self.rng,
            before_request=self.request_hooks(),
            plan_for=self.plan_for,
            bound_preset=self.bound_preset,
            renderer=self.runtime.prompt_renderer,
        )

    # -- generate_task -----------------------------------------------------------------------

    async def generate_task(
        self, task_messages: Sequence[Mapping[str, Any]], **options: Unpack[TaskKeywords]
    ) -> TaskResult:
        """One LLM request with profile, preset, world info, envelope, tools or schema, and a
        normalized :class:`~tavernkit.tasks.options.TaskResult` (the options:
        :class:`~tavernkit.tasks.options.TaskKeywords`). Raises
        :class:`~tavernkit.errors.GenerateTaskError`."""
        task = TaskOptions.of(task_messages, options)
        task.validate()
        context = self.for_side_tasks() if task.side_task else self
        return await context._in_window(lambda services: run_task(services, task, None))

    def generate_task_stream(
        self, task_messages: Sequence[Mapping[str, Any]], **options: Unpack[TaskKeywords]
    ) -> TaskStream:
        """:meth:`generate_task` as a stream of events ending in the result (the same
        parameters). Validation errors raise here, synchronously."""
        task = TaskOptions.of(task_messages, options)
        task.validate()
        context = self.for_side_tasks() if task.side_task else self
        return task_stream_in_window(
            self.chat_id, self.rng, lambda window: context._services(window=window), task
        )

    async def resolve_world_info_for_messages(
        self,
        messages: Sequence[Mapping[str, Any]],
        type: str = "quiet",
        fallback_to_current_chat: bool = False,
    ) -> WorldInfoResult:
        """A dry-run world-info scan of the context's books against ``messages`` (or the
        chat, when ``messages`` is empty and ``fallback_to_current_chat``). The result is
        reusable as ``runtime_world_info`` (``result.to_st()`` for JSON)."""
        return await resolve_world_info_for_messages(
            self,
            messages,
            self.rng,
            trigger=type,
            fallback_to_current_chat=fallback_to_current_chat,
        )

    async def build_preset_aware_prompt_messages(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        include_character_card: bool = True,
        llm_preset_name: str = "",
        runtime_world_info: WorldInfoResult | Mapping[str, Any] | None = None,
        substitute_macros: bool = True,
    ) -> list[dict[str, Any]]:
        """The messages ``generate_task`` would wrap around ``messages``, without sending."""
        return await build_preset_aware_prompt_messages(
            self,
            messages,
            include_character_card=include_character_card,
            llm_preset_name=llm_preset_name,
            runtime_world_info=runtime_world_info,
            substitute_macros=substitute_macros,
        )

    # -- tools -------------------------------------------------------------------------------

    def register_function_tool(self, tool: FunctionTool, *, replace: bool = False) -> None:
        """Add ``tool`` to the Tavern's registry (shared by every context of that Tavern)."""
        self.tools.register_function_tool(tool, replace=replace)

    def unregister_function_tool(self, name: str) -> bool:
        return self.tools.unregister_function_tool(name)

    async def _capabilities(self) -> ToolCapabilities:
        return (await self.resolve_named("")).capabilities

    async def is_tool_calling_supported(self) -> bool:
        """Whether the active profile's model calls tools natively."""
        return _supported(await self._capabilities())

    async def can_perform_tool_calls(self, kind: str = "normal", mode: str = "auto") -> bool:
        """The capability table's answer for a generation of ``kind`` on the active
        profile (see :mod:`tavernkit.tools.capability`)."""
        return _can_perform(kind, await self._capabilities(), mode)

    async def mcp_tools(self, server: str | None = None) -> list[FunctionTool]:
        """The owner's MCP tools as function tools for ``generate_task(tools=...)`` and
        :meth:`run_tool_loop`: every enabled ``tools`` registration's (the disabled tools
        left out), or only ``server``'s."""
        mcp = self.runtime.mcp
        return await (mcp.function_tools(server) if server is not None else mcp.tools())

    async def run_tool_loop(
        self,
        task_messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any] | FunctionTool],
        handlers: Mapping[str, ToolAction] | None = None,
        *,
        max_rounds: int = 5,
        abort: AbortSignal | None = None,
        **task_options: Any,
    ) -> ToolLoopResult:
        """Loop ``generate_task`` with the tools' results as ``tool`` messages until the model
        answers in text (the search-agent case). ``handlers`` run the calls by name (a
        ``FunctionTool`` may carry its own ``action``); ``task_options`` go to every
        ``generate_task`` call."""
        specs = tools_from_specs(tools, handlers)

        async def generate(history: list[dict[str, Any]]) -> tuple[str, Sequence[Any]]:
            result = await self.generate_task(history, tools=specs, abort=abort, **task_options)
            return result.assistant_text, list(result.tool_calls)

        return await _run_tool_loop(
            task_messages, generate, specs, max_rounds=max_rounds, abort=abort
        )

    # -- the lower-level calls ---------------------------------------------------------------

    async def generate_raw(self, prompt: str = "", **options: Any) -> str:
        """A literal prompt: no chat, no card, no world info (see
        :mod:`tavernkit.context.raw_generation`). Options: ``api``, ``instruct_override``,
        ``quiet_to_loud``, ``system_prompt``, ``response_length``, ``trim_names``,
        ``prefill``, ``json_schema``, ``llm_preset_name``, ``api_preset_name``,
        ``api_settings_override``, ``abort``."""
        raw = RawOptions(prompt=prompt, **options)
        connection = await self.resolve_named(raw.api_preset_name, "", raw.api_settings_override)
        return await self._in_window(lambda services: generate_raw(services, connection, raw))

    async def generate_raw_data(self, prompt: str = "", **options: Any) -> dict[str, Any]:
        """:meth:`generate_raw`'s response unprocessed, as an OpenAI-shaped body."""
        raw = RawOptions(prompt=prompt, **options)
        connection = await self.resolve_named(raw.api_preset_name, "", raw.api_settings_override)
        return await self._in_window(lambda services: generate_raw_data(services, connection, raw))

    async def generate_quiet_prompt(self, quiet_prompt: str = "", **options: Any) -> str:
        """A background generation on the live chat with ``quiet_prompt`` last; with
        ``quiet_to_loud`` the reply is also appended to the chat as the character's message.
        Options: ``quiet_to_loud``, ``skip_wian``, ``quiet_image``, ``quiet_name``,
        ``response_length``, ``force_ch_id``, ``json_schema``, ``remove_reasoning``,
        ``trim_to_sentence``, ``abort``.

        In a group chat the generation takes the view of the member ``force_ch_id`` names
        (an index into the group's members, or a name), else of the last speaker; as in
        SillyTavern, ``quiet_to_loud``, ``skip_wian`` and ``quiet_name`` do nothing there
        (:mod:`tavernkit.context.group_quiet`)."""
        quiet = QuietOptions(quiet_prompt=quiet_prompt, **options)
        connection = await self.resolve_named("")
        if quiet.quiet_to_loud and await is_group_chat(
            self.runtime.store, self.chat_id, owner=self.runtime.owner
        ):
            quiet = dataclasses.replace(quiet, quiet_to_loud=False)
        if not quiet.quiet_to_loud:
            return await self._in_window(
                lambda services: generate_quiet_prompt(services, connection, quiet)
            )
        return await self._quiet_to_loud(connection, quiet)

    async def _quiet_to_loud(self, connection: ResolvedConnection, quiet: QuietOptions) -> str:
        """The quiet generation, then its text appended as the character's message through
        the chat service, which owns every write to a chat. The chat's turn slot is held
        throughout, so the reply cannot land between a running turn's message and its
        reply (a busy chat raises ``ChatBusy``, as a second turn would)."""
        if self.chat_id is None:
            # the call is fine; this context has no chat for it to speak in
            raise GenerateTaskError(
                "unsupported_api",
                "quiet_to_loud appends to the chat: open the context with a chat_id",
                details={"field": "quiet_to_loud"},
            )
        runtime = self.runtime
        chat_id = (await runtime.store.get_chat_info(self.chat_id, owner=runtime.owner)).id
        chats = self._chats
        if chats is None:
            raise GenerateTaskError(
                "unsupported_api",
                "quiet_to_loud appends through the chat service: open the context with "
                "tk.context(chat_id)",
                details={"field": "quiet_to_loud"},
            )
        async with chats.slots.turn(chat_id):
            quiet = dataclasses.replace(quiet, quiet_to_loud=False)
            text = await self._in_window(
                lambda services: generate_quiet_prompt(services, connection, quiet)
            )
            await chats.append_reply(chat_id, text, model=connection.model)
        return text

    # -- the primitives (tavernkit.context.request_primitives) -------------------------------------

    async def send_chat_request(
        self,
        kind: str,
        messages: Sequence[Mapping[str, Any]],
        abort: AbortSignal | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """``messages`` as given to a chat backend, once (``sendOpenAIRequest``); options:
        ``tools``, ``tool_choice``, ``llm_preset_name``, ``api_preset_name``,
        ``api_settings_override``, ``request_scope`` (``"main"`` runs the main chat's
        hooks, ``"extension_internal"`` skips them), ``function_call_options``,
        ``json_schema``. Returns the OpenAI-shaped response body."""

        return await send_chat_request(self, kind, messages, abort, **options)

    def send_streaming_request(
        self,
        kind: str,
        messages: Sequence[Mapping[str, Any]],
        abort: AbortSignal | None = None,
        **options: Any,
    ) -> AsyncIterator[StreamChunk]:
        """:meth:`send_chat_request` as an async generator of ``StreamChunk``."""

        return send_streaming_request(self, kind, messages, abort, **options)

    async def send_generation_request(
        self,
        kind: str,
        data: Mapping[str, Any],
        abort: AbortSignal | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """``data`` routed by the connection's API family (``messages`` or ``prompt``)."""

        return await send_generation_request(self, kind, data, abort, **options)

    @property
    def chat_completion_service(self) -> ChatCompletionService:

        return ChatCompletionService(self)

    @property
    def text_completion_service(self) -> TextCompletionService:

        return TextCompletionService(self)

    @property
    def connection_manager(self) -> ConnectionManagerRequestService:
        """``ConnectionManagerRequestService``: send through a profile by name."""

        return ConnectionManagerRequestService(self)

    def stop_generation(self) -> bool:
        """Abort every generation running for this context's chat; whether any was."""
        return self.runtime.generations.stop(self.chat_id)

    @property
    def streaming_processor(self) -> StreamingProcessor | None:
        """The generation in flight for this chat (read-only), or ``None`` when idle."""
        return self.runtime.generations.current(self.chat_id)

    async def get_chat_completion_model(self) -> str:
        """The model the active profile sends to (the embedded model's when none is set)."""
        connection = await self.resolve_named("")
        return connection.model or EMBEDDED_PROFILE.model or ""
