"""Steps 2-4 of a chat turn: load the state, resolve the connection, scan world info, build
the prompt and convert it to the provider request.

The chat service runs this before every generation and the prompt inspector runs exactly the
same code (as a dry run), so what ``tavernkit prompt`` shows is what the next turn sends.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tavernkit.chat.deps import TurnDeps, resolve_profile
from tavernkit.chat.profile_preset import with_profile_preset
from tavernkit.chat.writer import choose_profile, with_writer_preset
from tavernkit.errors import ChatTurnError, GenerateTaskError
from tavernkit.generation.profiles import (
    LocalFactory,
    ResolvedConnection,
    sampling_from_preset,
    sampling_from_textgen,
)
from tavernkit.models.chat import ChatMetadata, Message
from tavernkit.models.chat_window import MessageWindow
from tavernkit.models.group_context import GroupPromptContext
from tavernkit.models.settings import Settings
from tavernkit.models.state import ChatState
from tavernkit.prompt import assembled as built
from tavernkit.prompt.convert import ChatShaping, to_provider_request
from tavernkit.prompt.from_chat_state import main_api_of
from tavernkit.prompt.pipeline import PromptTarget, begin
from tavernkit.prompt.postprocess import PromptNames
from tavernkit.prompt.state import chat_before_generation
from tavernkit.providers.request import PromptRequest
from tavernkit.providers.sources import ProviderSource
from tavernkit.store.chat_state import load_chat_state
from tavernkit.store.chat_window import ReplayRng, windowed, without_last
from tavernkit.store.protocol import Store
from tavernkit.text.tokens import (
    ByteEstimateTokenizer,
    CachedTokenizer,
    QuicktokTokenizer,
    Tokenizer,
    encoding_for_model,
)
from tavernkit.text.variables import InMemoryVariables
from tavernkit.worldinfo.result import WorldInfoResult

__all__ = [
    "BuiltPrompt",
    "OnConnection",
    "PreparedTurn",
    "TurnDraft",
    "TurnOverrides",
    "after_user_message",
    "build_turn_prompt",
    "load_turn_state",
    "prepare_from_state",
    "prepare_turn",
    "resolve_for_state",
    "resolve_profile",
    "resolve_turn",
    "turn_request",
    "turn_tokenizer",
]


@dataclass(frozen=True)
class TurnOverrides:
    """Per-turn choices that win over the stored selections."""

    profile: str | None = None
    persona: str | None = None
    model: str | None = None
    max_tokens: int | None = None
    compat: str | None = None
    #: stop strings added to the request's own for this turn (a script's ``/gen stop=[…]``:
    #: SillyTavern's ephemeral stopping strings)
    stop: tuple[str, ...] = ()

    @classmethod
    def of(cls, value: TurnOverrides | Mapping[str, Any] | None) -> TurnOverrides:
        if value is None:
            return cls()
        if isinstance(value, TurnOverrides):
            return value
        unknown = set(value) - set(cls.__dataclass_fields__)
        if unknown:
            raise ChatTurnError(
                "invalid_input",
                f"unknown turn override {sorted(unknown)[0]!r}",
                details={"field": f"overrides.{sorted(unknown)[0]}"},
            )
        return cls(**dict(value))


@dataclass(frozen=True, slots=True)
class TurnDraft:
    """What one turn asks for, before anything is loaded: the chat, SillyTavern's generation
    type, the per-turn overrides and the verb's own choices.

    ``kind`` (``normal``, ``swipe``, ``regenerate``, ``continue``, ``impersonate``,
    ``quiet``) reaches the world-info scan (entry triggers) and the builders (preset triggers,
    continue prefill, impersonation prompt). ``without_last_reply`` builds as if the last
    reply were deleted (what a regeneration sends, for a preview made before it is). A dry
    run (a preview) also records why each lorebook entry fired, for the prompt inspector. A
    group turn names the drafted member's ``character`` (its card, books and depth prompt
    replace the chat's) and its ``group`` context (the other members, join settings).
    """

    chat_id: str
    kind: str
    overrides: TurnOverrides = field(default_factory=TurnOverrides)
    quiet_prompt: str = ""
    quiet_name: str | None = None
    dry_run: bool = False
    without_last_reply: bool = False
    character: str | None = None
    group: GroupPromptContext | None = None


#: awaited with the turn's resolved connection before its prompt is built
OnConnection = Callable[[ResolvedConnection], Awaitable[None]]


@dataclass
class PreparedTurn:
    """Everything one generation needs, built once."""

    state: ChatState
    connection: ResolvedConnection
    main_api: str
    prompt: built.AssembledChat | built.AssembledText
    request: PromptRequest
    wi: WorldInfoResult | None
    variables: InMemoryVariables
    compat: str
    names: PromptNames = field(default_factory=PromptNames)
    # the request as built, when the plugins' hooks replaced it in a preview (``request`` is
    # then what the hooks made of it, which is what a turn sends)
    built_request: PromptRequest | None = None

    @property
    def char_name(self) -> str:
        character = self.state.character
        return character.name if character is not None else ""

    def request_for(self, source: str) -> PromptRequest:
        """The built prompt converted for an attempt on ``source``: SillyTavern's provider
        post-processing (squash, merge, Claude/Gemini conversion) run on the prompt builder's
        labelled blocks, with this turn's names and sampling; a text prompt is its request."""
        if not isinstance(self.prompt, built.AssembledChat):
            return self.request
        return to_provider_request(
            self.prompt,
            sampling=self.request.sampling,
            stop=self.request.stop,
            shaping=ChatShaping(source=source, names=self.names),
        )

    def changed_local_variables(self) -> dict[str, Any] | None:
        """The chat's variables after the build, when a macro changed them."""
        before = self.state.chat.metadata.variables if self.state.chat is not None else None
        after = self.variables.local_vars
        return after if after != (before or {}) else None

    def changed_global_variables(self) -> dict[str, Any]:
        before = self.state.global_variables
        return {k: v for k, v in self.variables.global_vars.items() if before.get(k) != v}


async def resolve_for_state(
    store: Store,
    state: ChatState,
    *,
    owner: str,
    model: str = "",
    client: Any = None,
    local_factory: LocalFactory | None = None,
    environ: Mapping[str, str] | None = None,
    sources: Mapping[str, ProviderSource] | None = None,
) -> ResolvedConnection:
    return await resolve_profile(
        store,
        state.profile,
        owner=owner,
        model=model,
        client=client,
        local_factory=local_factory,
        environ=environ,
        sources=sources,
    )


def turn_tokenizer(connection: ResolvedConnection, settings: Settings) -> Tokenizer:
    """The tokenizer a turn on ``connection`` counts its prompt with (shared by every turn of
    the process that uses the same encoding)."""
    main_api = main_api_of(family=connection.family, api=connection.api)
    return _tokenizer(main_api, connection.model, settings.prompt.tokenizer)


def _tokenizer(main_api: str, model: str | None, tokenizer_setting: int) -> Tokenizer:
    if main_api != "openai" and tokenizer_setting == 0:
        return ByteEstimateTokenizer()
    return _shared_tokenizer(encoding_for_model(model or ""))


@functools.lru_cache(maxsize=8)
def _shared_tokenizer(encoding: str) -> CachedTokenizer:
    """One counting cache per encoding for every turn of the process: a turn re-sends mostly
    the messages the last one sent, so their counts are found, not recomputed."""
    return CachedTokenizer(QuicktokTokenizer(encoding))


async def prepare_turn(
    deps: TurnDeps,
    draft: TurnDraft,
    *,
    state: ChatState | None = None,
    before_reload: Callable[[], Awaitable[None]] | None = None,
    on_connection: OnConnection | None = None,
) -> PreparedTurn:
    """Load, resolve and build one turn (see the module docstring): the stages
    :func:`load_turn_state`, :func:`resolve_turn`, :func:`build_turn_prompt` and
    :func:`turn_request`, over the chat's tail.

    Only the chat's tail is loaded (``load_chat_state(window=...)``); a build that reads past it
    is redone over a larger one, with ``deps.rng`` replaying the numbers the abandoned build
    drew, so the turn is the same as a build over the whole chat. ``state``: the chat's state
    as the caller already loaded it (``send`` after storing a message with macros), used for
    the first build instead of loading it again; ``before_reload`` is awaited before a build
    loads the chat from the store after all (``send`` writes the user's message it holds
    back, so the reloaded chat has it).

    ``on_connection`` is awaited with the turn's resolved connection before the prompt is built
    (each build, when one is redone): what needs only the connection (the turn's tools) can
    start then, in a task, and run while the prompt builds.
    """
    replay = ReplayRng(deps.rng) if deps.rng is not None else None
    preloaded = [state] if state is not None else []

    async def attempt(window: int) -> PreparedTurn:
        loaded = preloaded.pop() if preloaded else None
        if loaded is None:
            if before_reload is not None:
                await before_reload()
            loaded = await load_turn_state(deps, draft, window)
        elif draft.group is not None:
            loaded = loaded.model_copy(update={"group": draft.group})
        rng = replay.restart() if replay is not None else None
        return await prepare_from_state(deps, draft, loaded, rng, on_connection)

    return await windowed(draft.chat_id, attempt)


async def load_turn_state(deps: TurnDeps, draft: TurnDraft, window: int) -> ChatState:
    """Stage *load*: the chat's state over its last ``window`` messages (a group member's
    card and context in place of the chat's)."""
    loaded = await load_chat_state(
        deps.store,
        owner=deps.owner,
        chat_id=draft.chat_id,
        character=draft.character,
        persona=draft.overrides.persona,
        window=window,
    )
    if draft.group is not None:
        loaded = loaded.model_copy(update={"group": draft.group})
    return loaded


async def prepare_from_state(
    deps: TurnDeps,
    draft: TurnDraft,
    state: ChatState,
    rng: Callable[[], float] | None = None,
    on_connection: OnConnection | None = None,
) -> PreparedTurn:
    """Stages *resolve*, *build* and *request* over a loaded ``state``."""
    state, connection = await resolve_turn(deps, draft, state)
    if on_connection is not None:
        await on_connection(connection)
    state = await with_profile_preset(deps.store, state, connection, owner=deps.owner)
    state = await with_writer_preset(deps.store, state, connection, owner=deps.owner)
    built_prompt = await build_turn_prompt(deps, draft, state, connection, rng)
    names = _prompt_names(state)
    return PreparedTurn(
        state=state,
        connection=connection,
        main_api=built_prompt.main_api,
        prompt=built_prompt.prompt,
        request=turn_request(draft, state, connection, built_prompt.prompt, names),
        wi=built_prompt.wi,
        variables=built_prompt.variables,
        compat=built_prompt.compat,
        names=names,
    )


def after_user_message(
    state: ChatState,
    message: Message,
    metadata: ChatMetadata | None,
    global_variables: Mapping[str, Any],
) -> ChatState:
    """``state`` as the store holds it once ``message`` is appended, with the chat's new
    ``metadata`` (``None``: unchanged) and the owner's global variables."""
    chat = state.chat
    if chat is None:
        return state
    messages = chat.messages
    appended: list[Message] | MessageWindow = (
        messages.with_message(message)
        if isinstance(messages, MessageWindow)
        else [*messages, message]
    )
    header = (
        chat.header
        if metadata is None
        else chat.header.model_copy(update={"chat_metadata": metadata})
    )
    return state.model_copy(
        update={
            "chat": chat.model_copy(update={"messages": appended, "header": header}),
            "global_variables": dict(global_variables),
        }
    )


async def resolve_turn(
    deps: TurnDeps, draft: TurnDraft, state: ChatState
) -> tuple[ChatState, ResolvedConnection]:
    """Stage *resolve*: the turn's connection profile (the turn's override, else the
    character's writer, else the selection: :mod:`tavernkit.chat.writer`) resolved with the
    store's keys; the state carries the profile the turn uses."""
    overrides = draft.overrides
    state = await choose_profile(deps.store, state, overrides.profile, owner=deps.owner)
    try:
        connection = await deps.resolve(state.profile, overrides.model or "")
    except GenerateTaskError as exc:  # the resolver is shared with tasks
        raise ChatTurnError.of(exc) from exc
    return state, connection


@dataclass(frozen=True, slots=True)
class BuiltPrompt:
    """What stage *build* leaves: the prompt, the world-info scan, the variables as the
    macros left them, and the compatibility mode the build ran in."""

    main_api: str
    prompt: built.AssembledChat | built.AssembledText
    wi: WorldInfoResult | None
    variables: InMemoryVariables
    compat: str


async def build_turn_prompt(
    deps: TurnDeps,
    draft: TurnDraft,
    state: ChatState,
    connection: ResolvedConnection,
    rng: Callable[[], float] | None,
) -> BuiltPrompt:
    """Stage *build*: the memory step, the world-info scan and the prompt builder of the
    connection's API, over the state the turn builds from."""
    main_api = main_api_of(family=connection.family, api=connection.api)
    local = state.chat.metadata.variables if state.chat is not None else None
    variables = InMemoryVariables(dict(local or {}), dict(state.global_variables))
    session = begin(
        _build_state(draft, state, main_api),
        PromptTarget(
            main_api, connection.model, tokenizer=turn_tokenizer(connection, state.settings)
        ),
        compat=draft.overrides.compat or state.compat,
        variables=variables,
        renderer=deps.renderer,
    )
    forced: frozenset[str] = frozenset()
    if deps.memory is not None:  # before the scan: it reads the rearranged chat
        step = await deps.memory(
            session.state,
            session.prompt_state,
            session.substitute,
            owner=deps.owner,
            kind=draft.kind,
            dry_run=draft.dry_run,
            compat=session.compat,
        )
        session = step.session(session)
        forced = step.force_activate
    dry_run = draft.dry_run
    wi = session.scan(draft.kind, rng=rng, dry_run=dry_run, explain=dry_run, force_activate=forced)
    prompt = session.build(
        draft.kind,
        wi,
        quiet_prompt=draft.quiet_prompt,
        dry_run=dry_run,
        **_builder_options(draft, state, main_api),
    )
    return BuiltPrompt(main_api, prompt, wi, variables, session.compat)


def _build_state(draft: TurnDraft, state: ChatState, main_api: str) -> ChatState:
    """The state the prompt is built from: without the reply a text-completion swipe (or a
    regeneration's preview) replaces."""
    drop = draft.kind == "swipe" and main_api != "openai"
    if draft.without_last_reply and len(chat_before_generation(state.messages, draft.kind)) < len(
        state.messages
    ):
        drop = True  # a preview of a regeneration: the reply it replaces is gone by then
    if not drop or state.chat is None:
        return state
    # The chat-completion builder leaves the swiped reply out itself; the text one does not.
    chat = state.chat.model_copy(update={"messages": without_last(state.chat.messages)})
    return state.model_copy(update={"chat": chat})


def _builder_options(draft: TurnDraft, state: ChatState, main_api: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if draft.quiet_name is not None and main_api != "openai":
        options["quiet_name"] = draft.quiet_name
    if main_api == "openai":
        # the chat's images go to the model when the preset inlines media (SillyTavern's
        # default); the adapter turns them into a note for a model without vision
        preset = state.chat_preset
        options["inline_images"] = preset.media_inlining if preset is not None else True
    return options


def _prompt_names(state: ChatState) -> PromptNames:
    char_name = state.character.name if state.character is not None else ""
    group_names = tuple(state.group.names) if state.group is not None else ()
    return PromptNames(char_name=char_name, user_name=state.user_name, group_names=group_names)


def turn_request(
    draft: TurnDraft,
    state: ChatState,
    connection: ResolvedConnection,
    prompt: built.AssembledChat | built.AssembledText,
    names: PromptNames,
) -> PromptRequest:
    """Stage *request*: the built prompt converted to the provider request, with the preset's
    sampling and the turn's overrides (reply length, extra stop strings)."""
    overrides = draft.overrides
    if isinstance(prompt, built.AssembledChat):
        max_tokens = overrides.max_tokens
        if max_tokens is None and state.chat_preset is None:
            # no preset to say how long a reply may be: SillyTavern's response length setting
            max_tokens = state.settings.prompt.amount_gen
        sampling = sampling_from_preset(state.chat_preset, max_tokens=max_tokens)
        return to_provider_request(
            prompt,
            sampling=sampling,
            stop=overrides.stop,
            shaping=ChatShaping(source=connection.source, names=names),
        )
    settings = state.settings.prompt
    sampling = sampling_from_textgen(
        state.textgen_preset,
        max_tokens=overrides.max_tokens or settings.amount_gen,
        context_size=settings.max_context,
    )
    stop = list(prompt.stop)
    stop.extend(s for s in overrides.stop if s not in stop)
    return to_provider_request(prompt, sampling=sampling, stop=stop)
