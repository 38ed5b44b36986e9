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

from tavernkit.chat.profile_preset import with_profile_preset
from tavernkit.chat.writer import choose_profile, with_writer_preset
from tavernkit.errors import ChatTurnError, GenerateTaskError
from tavernkit.generation.profiles import (
    LocalFactory,
    ResolvedConnection,
    resolve_connection,
    sampling_from_preset,
    sampling_from_textgen,
)
from tavernkit.memory.turn import TurnMemory
from tavernkit.models.chat import ChatMetadata, Message
from tavernkit.models.chat_window import MessageWindow
from tavernkit.models.group_context import GroupPromptContext
from tavernkit.models.profile import ConnectionProfile
from tavernkit.models.settings import Settings
from tavernkit.models.state import ChatState
from tavernkit.prompt import assembled as built
from tavernkit.prompt.convert import to_provider_request
from tavernkit.prompt.from_chat_state import main_api_of
from tavernkit.prompt.pipeline import PromptTarget, begin
from tavernkit.prompt.postprocess import PromptNames
from tavernkit.prompt.state import chat_before_generation
from tavernkit.providers.request import PromptRequest
from tavernkit.providers.sources import ProviderSource
from tavernkit.store.chat_state import load_chat_state
from tavernkit.store.chat_window import ReplayRng, windowed, without_last
from tavernkit.store.protocol import Store
from tavernkit.text.render import PromptRenderer
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
    "PreparedTurn",
    "TurnOverrides",
    "after_user_message",
    "prepare_turn",
    "resolve_for_state",
    "resolve_profile",
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
            source=source,
            names=self.names,
            stop=self.request.stop,
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


async def resolve_profile(
    store: Store,
    profile: ConnectionProfile | None,
    *,
    owner: str,
    model: str = "",
    client: Any = None,
    local_factory: LocalFactory | None = None,
    environ: Mapping[str, str] | None = None,
    sources: Mapping[str, ProviderSource] | None = None,
) -> ResolvedConnection:
    """``profile`` (the embedded model for ``None``) resolved with the store's keys."""

    async def load_secret(key_id: str) -> str:
        return await store.get_api_key_secret(key_id, owner=owner)

    return await resolve_connection(
        profile,
        model_override=model,
        load_secret=load_secret,
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
    store: Store,
    *,
    owner: str,
    chat_id: str,
    kind: str,
    overrides: TurnOverrides,
    quiet_prompt: str = "",
    quiet_name: str | None = None,
    dry_run: bool = False,
    without_last_reply: bool = False,
    rng: Callable[[], float] | None = None,
    client: Any = None,
    local_factory: LocalFactory | None = None,
    environ: Mapping[str, str] | None = None,
    sources: Mapping[str, ProviderSource] | None = None,
    renderer: PromptRenderer | None = None,
    character: str | None = None,
    group: GroupPromptContext | None = None,
    state: ChatState | None = None,
    before_reload: Callable[[], Awaitable[None]] | None = None,
    memory: TurnMemory | None = None,
    on_connection: Callable[[ResolvedConnection], Awaitable[None]] | None = None,
) -> PreparedTurn:
    """Load, scan and build one turn of ``chat_id`` (see the module docstring).

    ``kind`` is SillyTavern's generation type (``normal``, ``swipe``, ``regenerate``,
    ``continue``, ``impersonate``, ``quiet``); it reaches the world-info scan (entry triggers)
    and the builders (preset triggers, continue prefill, impersonation prompt).
    ``without_last_reply`` builds as if the last reply were deleted (what a regeneration
    sends, for a preview made before it is). ``renderer`` (the Tavern's ``prompt_renderer``)
    makes every macro of the turn go through the renderer service, so its registered
    providers work in chat prompts. A dry run (a preview) also records why each lorebook entry
    fired, for the prompt inspector. The card fields are evaluated once and shared by the scan
    and the prompt, as SillyTavern evaluates them once per generation.

    ``memory`` (the chat service's ``ChatMemory``) applies the owner's memory settings before
    the world-info scan: vectorized entries, recalled messages, the summary.

    A group turn names the drafted member's ``character`` (its card, books and depth prompt
    replace the chat's) and its ``group`` context (the other members, join settings).

    Only the chat's tail is loaded (``load_chat_state(window=...)``); a build that reads past it
    is redone over a larger one, with ``rng`` replaying the numbers the abandoned build drew,
    so the turn is the same as a build over the whole chat. ``state``: the chat's state as the
    caller already loaded it (``send`` after storing a message with macros), used for the
    first build instead of loading it again; ``before_reload`` is awaited before a build
    loads the chat from the store after all (``send`` writes the user's message it holds
    back, so the reloaded chat has it).

    ``on_connection`` is awaited with the turn's resolved connection before the prompt is built
    (each build, when one is redone): what needs only the connection (the turn's tools) can
    start then, in a task, and run while the prompt builds.
    """
    replay = ReplayRng(rng) if rng is not None else None
    preloaded = [state] if state is not None else []

    async def attempt(window: int) -> PreparedTurn:
        loaded = preloaded.pop() if preloaded else None
        if loaded is None:
            if before_reload is not None:
                await before_reload()
            loaded = await load_chat_state(
                store,
                owner=owner,
                chat_id=chat_id,
                character=character,
                persona=overrides.persona,
                window=window,
            )
        if group is not None:
            loaded = loaded.model_copy(update={"group": group})
        return await _prepare_state(
            store,
            loaded,
            owner=owner,
            kind=kind,
            overrides=overrides,
            quiet_prompt=quiet_prompt,
            quiet_name=quiet_name,
            dry_run=dry_run,
            without_last_reply=without_last_reply,
            rng=replay.restart() if replay is not None else None,
            client=client,
            local_factory=local_factory,
            environ=environ,
            sources=sources,
            renderer=renderer,
            memory=memory,
            on_connection=on_connection,
        )

    return await windowed(chat_id, attempt)


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


async def _prepare_state(
    store: Store,
    state: ChatState,
    *,
    owner: str,
    kind: str,
    overrides: TurnOverrides,
    quiet_prompt: str,
    quiet_name: str | None,
    dry_run: bool,
    without_last_reply: bool,
    rng: Callable[[], float] | None,
    client: Any,
    local_factory: LocalFactory | None,
    environ: Mapping[str, str] | None,
    renderer: PromptRenderer | None,
    memory: TurnMemory | None = None,
    sources: Mapping[str, ProviderSource] | None = None,
    on_connection: Callable[[ResolvedConnection], Awaitable[None]] | None = None,
) -> PreparedTurn:
    # the turn's override, else the character's writer, else the selection (chat/writer.py)
    state = await choose_profile(store, state, overrides.profile, owner=owner)
    try:
        connection = await resolve_for_state(
            store,
            state,
            owner=owner,
            model=overrides.model or "",
            client=client,
            local_factory=local_factory,
            environ=environ,
            sources=sources,
        )
    except GenerateTaskError as exc:  # the resolver is shared with tasks
        raise ChatTurnError.of(exc) from exc
    if on_connection is not None:
        await on_connection(connection)
    state = await with_profile_preset(store, state, connection, owner=owner)
    state = await with_writer_preset(store, state, connection, owner=owner)
    main_api = main_api_of(family=connection.family, api=connection.api)
    build_state = state
    drop = kind == "swipe" and main_api != "openai"
    if without_last_reply and len(chat_before_generation(state.messages, kind)) < len(
        state.messages
    ):
        drop = True  # a preview of a regeneration: the reply it replaces is gone by then
    if drop and state.chat is not None:
        # The chat-completion builder leaves the swiped reply out itself; the text one does not.
        chat = state.chat.model_copy(update={"messages": without_last(state.chat.messages)})
        build_state = state.model_copy(update={"chat": chat})
    local = state.chat.metadata.variables if state.chat is not None else None
    variables = InMemoryVariables(dict(local or {}), dict(state.global_variables))
    tokens = turn_tokenizer(connection, state.settings)
    options: dict[str, Any] = {}
    if quiet_name is not None and main_api != "openai":
        options["quiet_name"] = quiet_name
    if main_api == "openai":
        # the chat's images go to the model when the preset inlines media (SillyTavern's
        # default); the adapter turns them into a note for a model without vision
        preset = state.chat_preset
        options["inline_images"] = preset.media_inlining if preset is not None else True
    session = begin(
        build_state,
        PromptTarget(main_api, connection.model, tokenizer=tokens),
        compat=overrides.compat or state.compat,
        variables=variables,
        renderer=renderer,
    )
    forced: frozenset[str] = frozenset()
    if memory is not None:  # before the scan: it reads the rearranged chat
        step = await memory(
            session.state,
            session.prompt_state,
            session.substitute,
            owner=owner,
            kind=kind,
            dry_run=dry_run,
            compat=session.compat,
        )
        session = step.session(session)
        forced = step.force_activate
    wi = session.scan(kind, rng=rng, dry_run=dry_run, explain=dry_run, force_activate=forced)
    prompt = session.build(kind, wi, quiet_prompt=quiet_prompt, dry_run=dry_run, **options)
    compat = session.compat
    user_name = state.user_name
    char_name = state.character.name if state.character is not None else ""
    group_names = tuple(state.group.names) if state.group is not None else ()
    names = PromptNames(char_name=char_name, user_name=user_name, group_names=group_names)
    request: PromptRequest
    if isinstance(prompt, built.AssembledChat):
        max_tokens = overrides.max_tokens
        if max_tokens is None and state.chat_preset is None:
            # no preset to say how long a reply may be: SillyTavern's response length setting
            max_tokens = state.settings.prompt.amount_gen
        sampling = sampling_from_preset(state.chat_preset, max_tokens=max_tokens)
        request = to_provider_request(
            prompt,
            sampling=sampling,
            source=connection.source,
            names=names,
            stop=overrides.stop,
        )
    else:
        settings = state.settings.prompt
        sampling = sampling_from_textgen(
            state.textgen_preset,
            max_tokens=overrides.max_tokens or settings.amount_gen,
            context_size=settings.max_context,
        )
        stop = list(prompt.stop)
        stop.extend(s for s in overrides.stop if s not in stop)
        request = to_provider_request(prompt, sampling=sampling, stop=stop)
    return PreparedTurn(
        state=state,
        connection=connection,
        main_api=main_api,
        prompt=prompt,
        request=request,
        wi=wi,
        variables=variables,
        compat=compat,
        names=names,
    )
