"""From the store's :class:`~tavernkit.models.state.ChatState` to the prompt engine's view.

:func:`prompt_state_from_chat_state` maps what the store gathered for a turn (card, persona,
preset or templates, settings, profile, chat with its metadata and Author's Note) onto the
prompt engine's :class:`~tavernkit.prompt.state.PromptState`; :func:`state_substitute` is the
build's macro evaluator; :func:`main_api_of` answers which API family a build is for. The
pipeline that runs them (:func:`tavernkit.prompt.pipeline.prepare`) is one module up.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tavernkit.models.character import Character
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.regex_script import embedded_scripts
from tavernkit.models.state import ChatState
from tavernkit.prompt.extensions import script_injections
from tavernkit.prompt.macros import MacroSubstitute, macro_substitute
from tavernkit.prompt.state import ExtensionPrompt, PromptState
from tavernkit.text.regex_scripts import ActiveScripts, ScriptLists
from tavernkit.text.variables import InMemoryVariables

if TYPE_CHECKING:
    from tavernkit.text.render import PromptRenderer

__all__ = ["main_api_of", "prompt_state_from_chat_state", "script_lists", "state_substitute"]

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


def main_api_of(
    state: ChatState | None = None, *, family: str | None = None, api: str | None = None
) -> str:
    """SillyTavern's ``main_api`` of a build: ``openai`` (chat completion) or a text API —
    the one answer to "which API family is this".

    With a resolved connection's ``family`` (``chat``/``text``) and ``api``: ``openai`` for the
    chat family, else the text API the connection speaks (``kobold``, ``novel``, else
    ``textgenerationwebui``). Without one: the state's profile's API, else the settings'
    ``main_api``.
    """
    if family is not None:
        if family == "chat":
            return "openai"
        text_api = _MAIN_API.get(api or "text", "textgenerationwebui")
        return "textgenerationwebui" if text_api == "openai" else text_api
    if state is None:
        return "openai"
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


def script_lists(state: ChatState, main_api: str | None = None) -> ScriptLists:
    """The regex scripts of a turn: the owner's global ones, the current preset's (the chat
    preset on a chat-completion API, the text-generation preset on a text one) when that
    preset is allowed, and the card's when that character is allowed (reference A2)."""
    regex = state.settings.regex
    api = main_api or main_api_of(state)
    preset: Any = state.chat_preset if api == "openai" else state.textgen_preset
    preset_id = state.chat_preset_id if api == "openai" else state.textgen_preset_id
    preset_scripts = embedded_scripts(_extensions(preset)) if preset is not None else []
    card_scripts = embedded_scripts(state.character.extensions) if state.character else []
    return ScriptLists(
        global_scripts=regex.scripts,
        preset_scripts=preset_scripts,
        scoped_scripts=card_scripts,
        preset_allowed=preset_id is not None and preset_id in regex.allowed_presets,
        scoped_allowed=(
            state.character_id is not None and state.character_id in regex.allowed_characters
        ),
        enabled=regex.enabled,
    )


def _extensions(preset: Any) -> Any:
    extensions = getattr(preset, "extensions", None)
    if extensions is None:
        extensions = (preset.model_extra or {}).get("extensions")
    return extensions


def _active_scripts(state: ChatState, main_api: str) -> ActiveScripts | None:
    regex = state.settings.regex
    card = state.character
    if not regex.enabled or (
        not regex.scripts
        and not (card is not None and card.extensions.get("regex_scripts"))
        and state.chat_preset_id is None
        and state.textgen_preset_id is None
    ):
        return None  # nothing can run: the builds skip every regex pass
    active = script_lists(state, main_api).active()
    return active if active else None


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
    api = main_api or main_api_of(state)
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
        extension_prompts={
            **script_injections(state.chat.metadata if state.chat is not None else None),
            **(extension_prompts or {}),
        },
        model=chosen_model,
        source=source,
        max_context=max_context,
        max_response=max_response,
        # Reasoning of earlier messages is sent back only to the API and model that wrote it.
        api=api,
        group=state.group,
        regex=_active_scripts(state, api),
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
