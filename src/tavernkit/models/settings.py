"""User-level settings that change prompts, and the current selections.

SillyTavern keeps these in ``settings.json`` (``world_info_settings``, ``power_user``, a few
top-level keys). :func:`settings_from_st` imports the parts that matter for prompts; the active
instruct/context/sysprompt/reasoning template *contents* in that file are returned separately by
``tavernkit.formats.settings`` so they can be stored as named templates.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field

from tavernkit.models.base import ValueModel
from tavernkit.models.memory import MemorySettings
from tavernkit.models.regex_script import RegexSettings, migrate_script

__all__ = [
    "POWER_USER_PROMPT_KEYS",
    "WORLD_INFO_ST_KEYS",
    "CharLore",
    "Compat",
    "PromptSettings",
    "ReasoningSettings",
    "Selections",
    "Settings",
    "WorldInfoSettings",
    "settings_from_st",
]

#: ``"st-1.18"`` reproduces SillyTavern 1.18's known bugs byte for byte; ``"default"`` fixes them.
Compat = Literal["default", "st-1.18"]


class CharLore(ValueModel):
    """A character's extra lorebooks (``world_info.charLore[]``)."""

    name: str
    extra_books: list[str] = Field(default_factory=list)


class WorldInfoSettings(ValueModel):
    """``world_info_settings``; defaults: a new SillyTavern install (recursion on, whole words)."""

    depth: int = 2
    min_activations: int = 0
    min_activations_depth_max: int = 0
    budget: int = 25
    budget_cap: int = 0
    include_names: bool = True
    recursive: bool = True
    overflow_alert: bool = False
    case_sensitive: bool = False
    match_whole_words: bool = True
    use_group_scoring: bool = False
    character_strategy: Literal[0, 1, 2] = 1
    max_recursion_steps: int = 0
    global_books: list[str] = Field(default_factory=list)
    char_lore: list[CharLore] = Field(default_factory=list)


class ReasoningSettings(ValueModel):
    """``power_user.reasoning``: how reasoning is parsed, shown and added back to prompts."""

    template: str = "Think XML"
    auto_parse: bool = False
    add_to_prompts: bool = False
    auto_expand: bool = False
    show_hidden: bool = False
    max_additions: int = 1


class PromptSettings(ValueModel):
    """The ``power_user`` switches that change what a prompt looks like."""

    tokenizer: int = 0
    token_padding: int = 64
    trim_spaces: bool = True
    collapse_newlines: bool = False
    trim_sentences: bool = False
    single_line: bool = False
    pin_examples: bool = False
    strip_examples: bool = False
    always_force_name2: bool = True
    user_prompt_bias: str = ""
    show_user_prompt_bias: bool = True
    prefer_character_prompt: bool = True
    prefer_character_jailbreak: bool = True
    custom_stopping_strings: str = ""
    custom_stopping_strings_macro: bool = True
    persona_description_position: int = 0
    persona_description_depth: int = 2
    persona_description_role: int = 0
    instruct_enabled: bool = False
    instruct_template: str = "Alpaca"
    context_template: str = "Default"
    sysprompt_enabled: bool = True
    sysprompt: str = "Neutral - Chat"
    main_api: str = "openai"
    max_context: int = 8192
    amount_gen: int = 350


class Selections(ValueModel):
    """What is active now (what ``Tavern.context()`` reads): names or ids of stored records."""

    character: str | None = None
    persona: str | None = None
    #: character id -> the id of the persona locked to that character (SillyTavern's persona
    #: "connections"): its chats speak as it unless the chat has a persona of its own
    character_personas: dict[str, str] = Field(default_factory=dict)
    chat_preset: str | None = None
    textgen_preset: str | None = None
    profile: str | None = None
    #: the connection profile side tasks run on (summaries, review, ``generate_task`` with
    #: ``side_task``); ``None``: they run on ``profile``, as turns do
    utility_profile: str | None = None
    user_name: str = "User"
    #: the Quick Reply sets bound globally (their names, in the bar's order); a fresh profile
    #: has SillyTavern's "Default" set in it
    quick_reply_sets: list[str] = Field(default_factory=lambda: ["Default"])


class Settings(ValueModel):
    """All user-level settings of one owner."""

    world_info: WorldInfoSettings = Field(default_factory=WorldInfoSettings)
    prompt: PromptSettings = Field(default_factory=PromptSettings)
    reasoning: ReasoningSettings = Field(default_factory=ReasoningSettings)
    selections: Selections = Field(default_factory=Selections)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    #: the Regex extension: global scripts, allowed cards and presets
    regex: RegexSettings = Field(default_factory=RegexSettings)
    compat: Compat = "default"


def _pick(src: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    return {ours: src[theirs] for ours, theirs in mapping.items() if theirs in src}


#: SillyTavern's ``world_info_settings`` key for each scan setting: our name with the
#: ``world_info_`` prefix. World info's ``ScanSettings`` reads the same table.
WORLD_INFO_ST_KEYS: Final = {
    name: f"world_info_{name}"
    for name in WorldInfoSettings.model_fields
    if name not in ("global_books", "char_lore")
}

#: The ``power_user`` keys :class:`PromptSettings` takes under the same names.
POWER_USER_PROMPT_KEYS: Final = (
    "tokenizer",
    "token_padding",
    "trim_spaces",
    "collapse_newlines",
    "trim_sentences",
    "single_line",
    "pin_examples",
    "strip_examples",
    "always_force_name2",
    "user_prompt_bias",
    "show_user_prompt_bias",
    "prefer_character_prompt",
    "prefer_character_jailbreak",
    "custom_stopping_strings",
    "custom_stopping_strings_macro",
    "persona_description_position",
    "persona_description_depth",
    "persona_description_role",
)


def settings_from_st(data: dict[str, Any]) -> Settings:
    """Read the prompt-relevant parts of SillyTavern's ``settings.json``.

    Unknown or missing keys keep our defaults; values of the wrong type raise pydantic's
    ``ValidationError`` (callers in ``formats`` turn it into a ``FormatError``).
    """
    wi_src = data.get("world_info_settings") or {}
    wi = _pick(wi_src, WORLD_INFO_ST_KEYS)
    wi_inner = wi_src.get("world_info") or {}
    wi["global_books"] = list(
        wi_inner.get("globalSelect") or wi_src.get("selected_world_info") or []
    )
    wi["char_lore"] = [
        {"name": item.get("name", ""), "extra_books": list(item.get("extraBooks") or [])}
        for item in wi_inner.get("charLore") or []
        if isinstance(item, dict)
    ]
    power = data.get("power_user") or {}
    prompt = {k: power[k] for k in POWER_USER_PROMPT_KEYS if k in power}
    prompt.update(_pick(data, {"main_api": "main_api", "max_context": "max_context"}))
    if "amount_gen" in data:
        prompt["amount_gen"] = data["amount_gen"]
    instruct = power.get("instruct") or {}
    if "enabled" in instruct:
        prompt["instruct_enabled"] = instruct["enabled"]
    if instruct.get("preset"):
        prompt["instruct_template"] = instruct["preset"]
    context = power.get("context") or {}
    if context.get("preset"):
        prompt["context_template"] = context["preset"]
    sysprompt = power.get("sysprompt") or {}
    if "enabled" in sysprompt:
        prompt["sysprompt_enabled"] = sysprompt["enabled"]
    if sysprompt.get("name"):
        prompt["sysprompt"] = sysprompt["name"]
    reasoning_src = power.get("reasoning") or {}
    reasoning = _pick(
        reasoning_src,
        {k: k for k in ("auto_parse", "add_to_prompts", "auto_expand", "show_hidden")}
        | {"max_additions": "max_additions", "template": "name"},
    )
    selections: dict[str, Any] = {}
    if data.get("username"):
        selections["user_name"] = data["username"]
    if power.get("default_persona"):
        selections["persona"] = power["default_persona"]
    oai = data.get("oai_settings") or {}
    if oai.get("preset_settings_openai"):
        selections["chat_preset"] = oai["preset_settings_openai"]
    if data.get("preset_settings"):
        selections["textgen_preset"] = data["preset_settings"]
    extensions = data.get("extension_settings") or {}
    regex_raw = extensions.get("regex") if isinstance(extensions, dict) else None
    disabled = extensions.get("disabledExtensions") if isinstance(extensions, dict) else None
    regex = {
        # the global scripts, migrated as SillyTavern migrates them when it starts; the allow
        # lists name avatar files, which name nothing here: cards are allowed again
        "scripts": [migrate_script(s) for s in regex_raw or [] if isinstance(s, dict)],
        "enabled": not (isinstance(disabled, list) and "regex" in disabled),
    }
    return Settings.model_validate(
        {
            "world_info": wi,
            "prompt": prompt,
            "reasoning": reasoning,
            "selections": selections,
            "regex": regex,
        }
    )
