"""SillyTavern's chat-completion preset (``presets/openai/*.json``, ``OpenAI Settings/*.json``).

A preset carries the prompt manager's prompts and their order, the utility prompts (new chat,
nudges, formats) and the sampler and model fields of every chat-completion source. Files are
open: any key we do not type is kept and written back in place.

Scalars are validated strictly (``strict=True``): a lax model would turn ``"0.7"`` into ``0.7``
or ``1`` into ``True`` and the file would no longer round-trip, so a value of the wrong JSON type
is reported (naming the field) instead of being silently changed.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

from pydantic import ConfigDict, Field

from tavernkit.models.base import Number, WireModel

__all__ = [
    "DEFAULT_PROMPTS",
    "DEFAULT_PROMPT_ORDER",
    "GLOBAL_CHARACTER_ID",
    "INJECTION_ABSOLUTE",
    "INJECTION_RELATIVE",
    "LEGACY_CHARACTER_ID",
    "ChatCompletionPreset",
    "PromptDefinition",
    "PromptOrderItem",
    "PromptOrderList",
    "default_prompt",
    "migrate_legacy_preset",
]

#: ``injection_position`` values: in the prompt-order list, or inserted into the chat at a depth.
INJECTION_RELATIVE: Final = 0
INJECTION_ABSOLUTE: Final = 1

#: SillyTavern runs its prompt manager with strategy "global" and this dummy character id, so
#: only the order list with this id is ever used.
GLOBAL_CHARACTER_ID: Final = 100001
#: The dummy id of older versions; presets written by them carry only this list.
LEGACY_CHARACTER_ID: Final = 100000

_STRICT = ConfigDict(strict=True)


class PromptDefinition(WireModel):
    """One item of ``prompts[]``: a prompt text, or a marker filled at run time."""

    model_config = _STRICT

    #: SillyTavern gives a prompt without one a random id on load; we leave that to the engine.
    identifier: str | None = None
    name: str = ""
    role: str = "system"
    content: str = ""
    #: Built-in prompt (not deletable in the UI).
    system_prompt: bool = False
    #: Placeholder whose text comes from elsewhere (character description, chat history...).
    marker: bool = False
    injection_position: int = INJECTION_RELATIVE
    injection_depth: int = 4
    injection_order: int = 100
    #: Generation types that include the prompt; empty means all of them.
    injection_trigger: list[str] = Field(default_factory=list)
    #: The card's own main/post-history prompt may not replace this one.
    forbid_overrides: bool = False
    enabled: bool | None = None


class PromptOrderItem(WireModel):
    """One entry of an order list: which prompt, and whether it is switched on."""

    model_config = _STRICT

    identifier: str
    enabled: bool = True


class PromptOrderList(WireModel):
    """``prompt_order[]``: the order of the prompts for one (dummy) character id."""

    model_config = _STRICT

    character_id: int | str
    order: list[PromptOrderItem] = Field(default_factory=list)


def _prompt(identifier: str, name: str, content: str | None) -> Mapping[str, Any]:
    # Same shape and key order as the prompts SillyTavern writes into a new preset.
    if content is None:
        record: dict[str, Any] = {
            "identifier": identifier,
            "name": name,
            "system_prompt": True,
            "marker": True,
        }
    else:
        record = {
            "name": name,
            "system_prompt": True,
            "role": "system",
            "content": content,
            "identifier": identifier,
        }
    return MappingProxyType(record)


#: ``chatCompletionDefaultPrompts``: the built-in prompts, used to fill a preset that lacks any.
DEFAULT_PROMPTS: Final[tuple[Mapping[str, Any], ...]] = (
    _prompt(
        "main",
        "Main Prompt",
        "Write {{char}}'s next reply in a fictional chat between {{charIfNotGroup}} and {{user}}.",
    ),
    _prompt("nsfw", "Auxiliary Prompt", ""),
    _prompt("dialogueExamples", "Chat Examples", None),
    _prompt("jailbreak", "Post-History Instructions", ""),
    _prompt("chatHistory", "Chat History", None),
    _prompt("worldInfoAfter", "World Info (after)", None),
    _prompt("worldInfoBefore", "World Info (before)", None),
    MappingProxyType(
        {
            "identifier": "enhanceDefinitions",
            "role": "system",
            "name": "Enhance Definitions",
            "content": "If you have more knowledge of {{char}}, add to the character's lore and "
            "personality to enhance them but keep the Character Sheet's definitions absolute.",
            "system_prompt": True,
            "marker": False,
        }
    ),
    _prompt("charDescription", "Char Description", None),
    _prompt("charPersonality", "Char Personality", None),
    _prompt("scenario", "Scenario", None),
    _prompt("personaDescription", "Persona Description", None),
)

#: The order SillyTavern creates for the global dummy character (``enhanceDefinitions`` off).
DEFAULT_PROMPT_ORDER: Final[tuple[tuple[str, bool], ...]] = (
    ("main", True),
    ("worldInfoBefore", True),
    ("personaDescription", True),
    ("charDescription", True),
    ("charPersonality", True),
    ("scenario", True),
    ("enhanceDefinitions", False),
    ("nsfw", True),
    ("worldInfoAfter", True),
    ("dialogueExamples", True),
    ("chatHistory", True),
    ("jailbreak", True),
)


def default_prompt(identifier: str) -> PromptDefinition | None:
    """A fresh copy of the built-in prompt ``identifier``, or None if it is not built in."""
    for raw in DEFAULT_PROMPTS:
        if raw["identifier"] == identifier:
            return PromptDefinition.model_validate(dict(raw))
    return None


class ChatCompletionPreset(WireModel):
    """A chat-completion preset; defaults are those of SillyTavern's shipped ``Default.json``."""

    model_config = _STRICT

    # Source and model selection (free-form strings; several files carry null here).
    chat_completion_source: str | None = "openai"
    openai_model: str | None = "gpt-4-turbo"
    claude_model: str | None = "claude-sonnet-4-5"
    openrouter_model: str | None = "OR_Website"
    openrouter_use_fallback: bool | None = False
    openrouter_group_models: bool | None = False
    openrouter_sort_models: str | None = "alphabetically"
    ai21_model: str | None = "jamba-large"
    mistralai_model: str | None = "mistral-large-latest"
    custom_model: str | None = ""
    custom_url: str | None = ""
    custom_include_body: str | None = ""
    custom_exclude_body: str | None = ""
    custom_include_headers: str | None = ""
    google_model: str | None = "gemini-2.5-pro"
    vertexai_model: str | None = "gemini-2.5-pro"

    # Samplers.
    temperature: Number = 1
    frequency_penalty: Number = 0
    presence_penalty: Number = 0
    top_p: Number = 1
    top_k: Number = 0
    top_a: Number = 0
    min_p: Number = 0
    repetition_penalty: Number = 1
    seed: Number = -1
    n: int = 1

    # Budget and utility prompts.
    openai_max_context: int = 4095
    openai_max_tokens: int = 300
    #: ``character_names_behavior``: -1 none, 0 default, 1 completion (``name`` field), 2 content.
    names_behavior: int = 0
    send_if_empty: str = ""
    impersonation_prompt: str = (
        "[Write your next reply from the point of view of {{user}}, using the chat history so "
        "far as a guideline for the writing style of {{user}}. Don't write as {{char}} or "
        "system. Don't describe actions of {{char}}.]"
    )
    new_chat_prompt: str = "[Start a new Chat]"
    new_group_chat_prompt: str = "[Start a new group chat. Group members: {{group}}]"
    new_example_chat_prompt: str = "[Example Chat]"
    continue_nudge_prompt: str = (
        "[Continue your last message without repeating its original content.]"
    )
    bias_preset_selected: str | None = "Default (none)"
    reverse_proxy: str | None = ""
    proxy_password: str | None = ""
    max_context_unlocked: bool = False
    wi_format: str = "{0}"
    scenario_format: str = "{{scenario}}"
    personality_format: str = "{{personality}}"
    group_nudge_prompt: str = "[Write the next reply only as {{char}}.]"
    stream_openai: bool = True

    prompts: list[PromptDefinition] = Field(default_factory=list)
    prompt_order: list[PromptOrderList] = Field(default_factory=list)

    show_external_models: bool = False
    assistant_prefill: str = ""
    assistant_impersonation: str = ""
    use_sysprompt: bool = False
    squash_system_messages: bool = False
    media_inlining: bool = True
    bypass_status_check: bool = False
    continue_prefill: bool = False
    continue_postfix: str = " "

    def effective_prompts(self) -> list[PromptDefinition]:
        """The prompts as SillyTavern sees them after loading: the preset's own (all built-ins
        when it has none), then every built-in prompt it lacks, appended in table order."""
        own = self.prompts
        return [*own, *(p.model_copy() for p in self.effective_prompts_shared()[len(own) :])]

    def effective_prompts_shared(self) -> Sequence[PromptDefinition]:
        """:meth:`effective_prompts` for a reader that changes none of them: the built-ins
        are the ones validated once, not copies (a prompt build reads them every turn, and
        copying a dozen pydantic models cost it more than reading them)."""
        own = self.prompts
        present = {p.identifier for p in own}
        return [*own, *(p for p in _default_prompts() if p.identifier not in present)]

    def prompt(self, identifier: str) -> PromptDefinition | None:
        """The prompt with that identifier: the preset's own, else the built-in one (a preset
        lacking a built-in prompt gets it on load), else None."""
        for p in self.prompts:
            if p.identifier == identifier:
                return p
        return default_prompt(identifier)

    def order_list(self, character_id: int) -> PromptOrderList | None:
        """The stored order list for that character id (ids written as strings count too)."""
        for entry in self.prompt_order:
            if str(entry.character_id) == str(character_id):
                return entry
        return None

    def active_order(self, character_id: int = GLOBAL_CHARACTER_ID) -> list[PromptOrderItem]:
        """The order the prompt manager walks: the list for ``character_id``, else the legacy
        100000 list (old presets carry only that one), else SillyTavern's default order."""
        own, items = self._order_of(character_id)
        return list(items) if own else [item.model_copy() for item in items]

    def active_order_shared(
        self, character_id: int = GLOBAL_CHARACTER_ID
    ) -> Sequence[PromptOrderItem]:
        """:meth:`active_order` for a reader that changes none of its items (the default
        order's are shared, not copies)."""
        return self._order_of(character_id)[1]

    def _order_of(self, character_id: int) -> tuple[bool, Sequence[PromptOrderItem]]:
        # (whether the preset has it, the items)
        for cid in (character_id, LEGACY_CHARACTER_ID):
            found = self.order_list(cid)
            if found is not None:
                return True, found.order
        return False, _default_order()


@functools.cache
def _default_prompts() -> tuple[PromptDefinition, ...]:
    """SillyTavern's built-in prompts, validated once; copies where a caller may change them."""
    return tuple(PromptDefinition.model_validate(dict(raw)) for raw in DEFAULT_PROMPTS)


@functools.cache
def _default_order() -> tuple[PromptOrderItem, ...]:
    """SillyTavern's default prompt order, made once; copies where a caller may change them."""
    return tuple(
        PromptOrderItem.create(identifier=ident, enabled=on) for ident, on in DEFAULT_PROMPT_ORDER
    )


#: Pre-prompt-manager settings keys and the built-in prompt each one became.
_LEGACY_PROMPT_KEYS: Final = (
    ("main_prompt", "main"),
    ("nsfw_prompt", "nsfw"),
    ("jailbreak_prompt", "jailbreak"),
)


def migrate_legacy_preset(data: Mapping[str, Any]) -> dict[str, Any]:
    """Move the pre-prompt-manager keys into ``prompts``, as SillyTavern does when it loads one.

    When any of ``main_prompt``, ``nsfw_prompt`` or ``jailbreak_prompt`` is a non-empty string:
    a preset without prompts gets the built-in ones; each non-empty legacy text becomes the
    content of its prompt (``main``, ``nsfw``, ``jailbreak``; a missing one is appended from the
    built-ins) and its key is removed. Empty legacy keys stay as they are, as in SillyTavern.
    ``names_in_completion`` (the old boolean) becomes ``names_behavior`` 1 or 0 when the preset
    has no ``names_behavior``. Returns a new mapping; ``data`` is not changed, and a preset
    that needs no migration comes back equal, in the same key order.
    """
    out = copy.deepcopy(dict(data))
    if "names_behavior" not in out and isinstance(out.get("names_in_completion"), bool):
        out["names_behavior"] = 1 if out["names_in_completion"] else 0

    # JavaScript truthiness decides, as in SillyTavern: an empty legacy text migrates nothing.
    legacy = [(k, ident) for k, ident in _LEGACY_PROMPT_KEYS if out.get(k)]
    if not legacy:
        return out

    prompts = out.get("prompts")
    if prompts is None or prompts == []:
        prompts = [dict(raw) for raw in DEFAULT_PROMPTS]
        out["prompts"] = prompts
    elif not isinstance(prompts, list):
        return out  # not ours to repair: validation reports the bad ``prompts`` value
    for key, ident in legacy:
        target = next(
            (p for p in prompts if isinstance(p, dict) and p.get("identifier") == ident), None
        )
        if target is None:
            target = next(dict(raw) for raw in DEFAULT_PROMPTS if raw["identifier"] == ident)
            prompts.append(target)
        target["content"] = out.pop(key)
    return out
