"""From the store's :class:`~tavernkit.models.state.ChatState` to a built prompt.

:func:`prompt_state_from_chat_state` maps what the store gathered for a turn (card, persona,
preset or templates, settings, profile, chat with its metadata and Author's Note) onto the
prompt engine's :class:`~tavernkit.prompt.state.PromptState`; :func:`build_prompt_for_state`
is the one-call pipeline a turn runs: one macro environment (chat and global variables
included), the world-info scan over the state's books, then the chat- or text-completion
builder, whichever the connection's API family calls for.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tavernkit.models.character import Character
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.state import ChatState
from tavernkit.prompt.card import CardFields, card_fields
from tavernkit.prompt.chat_completion import build_chat_completion
from tavernkit.prompt.extensions import worldinfo_outlets
from tavernkit.prompt.macros import MacroSubstitute, macro_substitute
from tavernkit.prompt.request import ChatPrompt, PromptRequest, TextPrompt
from tavernkit.prompt.state import ExtensionPrompt, PromptState
from tavernkit.prompt.text_completion import build_text_completion
from tavernkit.prompt.wi_scan import scan_world_info
from tavernkit.text.tokens import ByteEstimateTokenizer, Tokenizer, tokenizer_for_model
from tavernkit.text.variables import InMemoryVariables
from tavernkit.worldinfo.result import WorldInfoResult
from tavernkit.worldinfo.scan import scan as wi_scan

if TYPE_CHECKING:
    from tavernkit.text.render import PromptRenderer

__all__ = [
    "build_prompt_for_state",
    "main_api_for",
    "prompt_state_from_chat_state",
    "scan_for_state",
    "state_substitute",
]

#: A connection profile's API family -> SillyTavern's ``main_api``.
_MAIN_API = {
    "chat": "openai",
    "text": "textgenerationwebui",
    "local": "textgenerationwebui",
    "kobold": "kobold",
    "novel": "novel",
}

#: The preset field holding the model of each chat-completion source.
_MODEL_FIELDS = {
    "openai": "openai_model",
    "claude": "claude_model",
    "openrouter": "openrouter_model",
    "ai21": "ai21_model",
    "mistralai": "mistralai_model",
    "custom": "custom_model",
    "makersuite": "google_model",
    "vertexai": "vertexai_model",
}


def main_api_for(state: ChatState) -> str:
    """``openai`` (chat completion) or a text API: the profile's family, else the setting."""
    if state.profile is not None:
        return _MAIN_API.get(state.profile.api, state.settings.prompt.main_api)
    return state.settings.prompt.main_api


def _preset_model(preset: ChatCompletionPreset | None) -> str:
    if preset is None:
        return ""
    field = _MODEL_FIELDS.get(preset.chat_completion_source or "openai", "openai_model")
    value = getattr(preset, field, None)
    if value is None:
        extra = preset.model_extra or {}
        value = extra.get(field)
    return str(value or "")


def prompt_state_from_chat_state(
    state: ChatState,
    *,
    model: str | None = None,
    main_api: str | None = None,
    extension_prompts: Mapping[str, ExtensionPrompt] | None = None,
) -> PromptState:
    """The prompt engine's view of one turn.

    ``model`` overrides the profile's (then the preset's source model); ``main_api`` overrides
    the API family (``openai`` = chat completion). Chat completion takes its context and
    response sizes from the preset; text completion from the settings (``max_context``,
    ``amount_gen``), capped by the profile's context window when it declares one.
    """
    api = main_api or main_api_for(state)
    is_chat = api == "openai"
    profile = state.profile
    prompt_settings = state.settings.prompt
    preset = state.chat_preset
    chosen_model = model or (profile.model if profile and profile.model else None)
    if chosen_model is None:
        chosen_model = _preset_model(preset) if is_chat else ""
    if profile is not None:
        source = profile.source
    elif is_chat:
        source = (preset.chat_completion_source if preset else None) or "openai"
    else:
        source = api
    max_context = max_response = None
    if not is_chat:
        max_context = prompt_settings.max_context
        window = profile.capabilities.context_window if profile else None
        if window:
            max_context = min(max_context, window)
        max_response = prompt_settings.amount_gen
    instruct = state.instruct
    character = state.character if state.character is not None else Character()
    return PromptState(
        character=character,
        messages=state.messages,
        persona=state.persona,
        user_name=state.user_name,
        chat_metadata=state.chat.metadata if state.chat is not None else None,
        preset=preset,
        instruct=instruct,
        context=state.context,
        sysprompt=state.sysprompt,
        instruct_enabled=bool(prompt_settings.instruct_enabled and instruct is not None),
        sysprompt_enabled=prompt_settings.sysprompt_enabled,
        settings=prompt_settings.model_copy(update={"main_api": api}),
        reasoning=state.settings.reasoning,
        reasoning_template=state.reasoning,
        extension_prompts=dict(extension_prompts or {}),
        model=chosen_model,
        source=source,
        max_context=max_context,
        max_response=max_response,
        # Reasoning of earlier messages is sent back only to the API and model that wrote it.
        api=api,
        group=state.group,
    )


def state_substitute(
    state: ChatState,
    prompt_state: PromptState,
    *,
    compat: str,
    variables: Any = None,
    renderer: PromptRenderer | None = None,
    **env_overrides: Any,
) -> MacroSubstitute:
    """The macro evaluator of one build: names, card and chat fields, and both variable
    scopes (copies of the chat's and the owner's global variables unless ``variables`` — any
    ``Variables`` implementation — is given, so a dry build changes nothing)."""
    if variables is None:
        local = state.chat.metadata.variables if state.chat is not None else None
        variables = InMemoryVariables(dict(local or {}), dict(state.global_variables))
    return macro_substitute(
        prompt_state, compat=compat, variables=variables, renderer=renderer, **env_overrides
    )


def _default_tokenizer(prompt_state: PromptState, is_chat: bool) -> Tokenizer:
    if is_chat:
        return tokenizer_for_model(prompt_state.model)
    # Text completion with tokenizer NONE (SillyTavern's default): the byte estimate.
    if prompt_state.settings.tokenizer == 0:
        return ByteEstimateTokenizer()
    return tokenizer_for_model(prompt_state.model)


def scan_for_state(
    state: ChatState,
    prompt_state: PromptState,
    substitute: MacroSubstitute,
    *,
    kind: str = "normal",
    tokenizer: Tokenizer,
    compat: str,
    rng: Callable[[], float] | None = None,
    dry_run: bool = False,
    card: CardFields | None = None,
    explain: bool = False,
) -> WorldInfoResult | None:
    """The world-info scan over the state's books (``None`` when it has none); the result's
    ``timed_state`` is the chat's next ``timedWorldInfo``. ``card``: the build's evaluated card
    fields, when the caller shares them with the prompt builder. ``explain`` records why each
    entry fired or not (``WorldInfoResult.explain``; off on the hot path)."""
    if not state.books:
        return None
    return scan_world_info(
        prompt_state,
        [(b.name, b.book, b.scope) for b in state.books],
        state.settings.world_info,
        substitute,
        kind=kind,
        is_chat=prompt_state.settings.main_api == "openai",
        count_tokens=tokenizer.count,
        character_filename=state.character_filename,
        rng=rng,
        compat=compat,
        dry_run=dry_run,
        card=card,
        scan=functools.partial(wi_scan, explain=True) if explain else None,
    )


def build_prompt_for_state(
    state: ChatState,
    *,
    kind: str = "normal",
    wi_result: WorldInfoResult | None = None,
    tokenizer: Tokenizer | None = None,
    compat: str | None = None,
    quiet_prompt: str = "",
    model: str | None = None,
    main_api: str | None = None,
    rng: Callable[[], float] | None = None,
    variables: Any = None,
    extension_prompts: Mapping[str, ExtensionPrompt] | None = None,
    dry_run: bool = False,
    renderer: PromptRenderer | None = None,
    card: CardFields | None = None,
    **builder_options: Any,
) -> PromptRequest:
    """Build the prompt of one turn from the store's state, SillyTavern's way.

    The world-info scan runs when ``wi_result`` is None (books from ``state.books``, settings
    from ``state.settings.world_info``, the same macro evaluator as the prompt); pass a result
    to reuse a scan (its timed state is then the caller's to save). ``compat`` defaults to the
    state's setting. The API family comes from the profile, else the settings' ``main_api``:
    ``openai`` builds a :class:`ChatPrompt`, anything else a :class:`TextPrompt`.
    ``builder_options`` go to the builder (``tool_tokens=``, ``inline_images=``...).
    ``renderer`` (``Tavern.prompt_renderer``) makes every macro go through the renderer service,
    so its registered functions and variables work in this prompt.

    The card fields are macro-evaluated once, before the scan, and both the scan and the
    builder read that one result, as SillyTavern's ``Generate`` does: a ``{{random}}`` in the
    description is rolled once and an ``{{incvar}}`` moves once per build. A caller that ran
    its own scan passes the fields it scanned with as ``card``.
    """
    prompt_state = prompt_state_from_chat_state(
        state, model=model, main_api=main_api, extension_prompts=extension_prompts
    )
    is_chat = prompt_state.settings.main_api == "openai"
    mode = compat or state.compat
    tokens = tokenizer if tokenizer is not None else _default_tokenizer(prompt_state, is_chat)
    sub = state_substitute(state, prompt_state, compat=mode, variables=variables, renderer=renderer)
    fields = card if card is not None else card_fields(prompt_state, sub)
    wi = wi_result
    if wi is None:
        wi = scan_for_state(
            state,
            prompt_state,
            sub,
            kind=kind,
            tokenizer=tokens,
            compat=mode,
            rng=rng,
            dry_run=dry_run,
            card=fields,
        )
    if wi is not None:
        sub.env.outlets = worldinfo_outlets(wi)
    result: ChatPrompt | TextPrompt
    if is_chat:
        result = build_chat_completion(
            prompt_state,
            wi,
            kind=kind,
            tokenizer=tokens,
            compat=mode,
            substitute=sub,
            quiet_prompt=quiet_prompt,
            dry_run=dry_run,
            card=fields,
            **builder_options,
        )
    else:
        result = build_text_completion(
            prompt_state,
            wi,
            kind=kind,
            tokenizer=tokens,
            compat=mode,
            substitute=sub,
            quiet_prompt=quiet_prompt,
            card=fields,
            **builder_options,
        )
    return result
