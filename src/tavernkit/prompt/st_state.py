"""A :class:`PromptState` from SillyTavern's live objects (what its page holds before
``Generate``): the character, persona, chat array, ``power_user`` and ``oai_settings``.

This is how a recorded SillyTavern generation is replayed through tavernkit's builders, and how
an exported browser state can be imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from tavernkit.errors import FormatError
from tavernkit.models.character import Character
from tavernkit.models.chat import ChatMetadata, Message
from tavernkit.models.persona import Persona
from tavernkit.models.preset import ChatCompletionPreset, migrate_legacy_preset
from tavernkit.models.settings import (
    POWER_USER_PROMPT_KEYS,
    PromptSettings,
    ReasoningSettings,
)
from tavernkit.models.templates import (
    ContextTemplate,
    InstructTemplate,
    ReasoningTemplate,
    SystemPrompt,
    migrate_legacy_instruct,
)
from tavernkit.prompt.state import AuthorsNote, PromptState

__all__ = ["prompt_state_from_st"]


def _validate(model: Any, data: Any, source: str, field: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise FormatError(err["msg"], source=source, field=f"{field}.{loc}") from exc


def _chat_metadata(inputs: Mapping[str, Any], live: Mapping[str, Any], source: str) -> ChatMetadata:
    """The chat's metadata: the live ``chat_metadata`` with the case's Author's Note."""
    metadata_raw: dict[str, Any] = dict(live.get("chat_metadata") or {})
    metadata_raw.update(inputs.get("author_note_chat_metadata") or {})
    note_in = inputs.get("author_note")
    if isinstance(note_in, Mapping):
        metadata_raw.update(
            {
                "note_prompt": note_in.get("prompt", ""),
                "note_interval": note_in.get("interval", 1),
                "note_depth": note_in.get("depth", 4),
                "note_position": note_in.get("position", 1),
                "note_role": note_in.get("role", 0),
            }
        )
    metadata_raw = {k: v for k, v in metadata_raw.items() if v is not None}
    metadata: ChatMetadata = _validate(ChatMetadata, metadata_raw, source, "chat_metadata")
    return metadata


def _settings_values(
    inputs: Mapping[str, Any],
    live: Mapping[str, Any],
    power: Mapping[str, Any],
    persona: Persona | None,
) -> dict[str, Any]:
    """The prompt settings as ``power_user`` and the case's settings give them."""
    settings_in = dict(inputs.get("settings") or {})
    settings_values = {k: power[k] for k in POWER_USER_PROMPT_KEYS if k in power}
    settings_values["main_api"] = settings_in.get("main_api", live.get("main_api", "openai"))
    for key in ("max_context", "amount_gen"):
        value = settings_in.get(key, live.get(key))
        if isinstance(value, int):
            settings_values[key] = value
    if persona is not None:
        settings_values["persona_description_position"] = persona.position
    return settings_values


def _reasoning(raw: Any) -> tuple[ReasoningSettings | None, ReasoningTemplate | None]:
    """``power_user.reasoning`` as the settings and the template it names."""
    if not isinstance(raw, Mapping):
        return None, None
    settings = ReasoningSettings(
        template=str(raw.get("name", "Think XML")),
        auto_parse=bool(raw.get("auto_parse", False)),
        add_to_prompts=bool(raw.get("add_to_prompts", False)),
        max_additions=int(raw.get("max_additions", 1)),
    )
    template = ReasoningTemplate(
        name=str(raw.get("name", "Think XML")),
        prefix=str(raw.get("prefix", "")),
        suffix=str(raw.get("suffix", "")),
        separator=str(raw.get("separator", "")),
    )
    return settings, template


def prompt_state_from_st(
    inputs: Mapping[str, Any],
    effective_settings: Mapping[str, Any] | None = None,
    *,
    source: str = "<st state>",
) -> PromptState:
    """Build the state of one generation from a prompt case's ``inputs`` (card, persona, chat,
    preset or instruct/context/sysprompt, Author's Note, settings) and ``effective_settings``
    (``power_user``, ``oai_settings``, ``chat_metadata``...)."""
    live = dict(effective_settings or {})
    power = dict(live.get("power_user") or {})
    settings_in = dict(inputs.get("settings") or {})

    card = inputs.get("card") or {}
    data = card.get("data") if isinstance(card.get("data"), Mapping) else card
    character = _validate(Character, data, source, "card.data")

    persona_in = inputs.get("persona") or {}
    persona = _validate(Persona, dict(persona_in), source, "persona") if persona_in else None

    messages = [
        _validate(Message, m, source, f"chat[{i}]") for i, m in enumerate(inputs.get("chat") or [])
    ]

    metadata = _chat_metadata(inputs, live, source)
    settings_values = _settings_values(inputs, live, power, persona)
    settings = _validate(PromptSettings, settings_values, source, "power_user")

    preset = None
    preset_raw = inputs.get("preset") or live.get("oai_settings")
    if isinstance(preset_raw, Mapping):
        preset = _validate(
            ChatCompletionPreset, migrate_legacy_preset(preset_raw), source, "preset"
        )

    def template(model: Any, key: str, migrate: Any = None) -> Any:
        raw = inputs.get(key) or power.get(key)
        if not isinstance(raw, Mapping):
            return None
        raw = dict(raw)
        return _validate(model, migrate(raw) if migrate else raw, source, key)

    instruct = template(InstructTemplate, "instruct", migrate_legacy_instruct)
    context = template(ContextTemplate, "context")
    sysprompt = template(SystemPrompt, "sysprompt")
    reasoning, reasoning_template = _reasoning(power.get("reasoning"))

    main_api = str(settings_values["main_api"])
    is_chat = main_api == "openai"
    oai = live.get("oai_settings") or {}
    model = str(settings_in.get("cc_custom_model") or oai.get("custom_model") or "")
    max_context = max_response = None
    if not is_chat:
        max_context = settings.max_context
        max_response = settings.amount_gen
    return PromptState(
        character=character,
        messages=messages,
        persona=persona,
        user_name=str(live.get("name1") or (persona.name if persona else "User")),
        chat_metadata=metadata,
        preset=preset,
        instruct=instruct,
        context=context,
        sysprompt=sysprompt,
        instruct_enabled=bool(instruct.enabled) if instruct is not None else False,
        sysprompt_enabled=bool(sysprompt.enabled) if sysprompt is not None else True,
        settings=settings,
        reasoning=reasoning,
        reasoning_template=reasoning_template,
        authors_note=AuthorsNote.from_metadata(metadata),
        model=model,
        source=str(oai.get("chat_completion_source") or "openai") if is_chat else main_api,
        max_context=max_context,
        max_response=max_response,
    )
