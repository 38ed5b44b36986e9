"""The prompt collection of a chat-completion build (``getPromptCollection`` and
``preparePromptsForChatCompletion``).

Walk the preset's order list; keep each enabled prompt whose trigger list allows the generation
type (``main`` stays, emptied, when it is off); substitute macros; then fill the markers with the
character, persona and world-info texts and add the runtime prompts (quiet, impersonate, Author's
Note...), each taking its place from the marker of the same identifier when there is one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from tavernkit.models.persona import PersonaPosition
from tavernkit.models.preset import (
    INJECTION_ABSOLUTE,
    ChatCompletionPreset,
    PromptDefinition,
    PromptOrderItem,
)
from tavernkit.prompt.card import CardFields
from tavernkit.prompt.extensions import ROLE_NAMES
from tavernkit.prompt.state import ExtensionPosition, ExtensionPrompt, PromptState, Substitute

__all__ = [
    "KNOWN_EXTENSION_KEYS",
    "Prompt",
    "PromptCollection",
    "TurnTexts",
    "build_prompt_collection",
]

#: Extension keys with a named place in the prompt manager, and their identifiers.
KNOWN_EXTENSION_KEYS: Mapping[str, str] = {
    "1_memory": "summary",
    "2_floating_prompt": "authorsNote",
    "3_vectors": "vectorsMemory",
    "4_vectors_data_bank": "vectorsDataBank",
    "chromadb": "smartContext",
}
_NON_WORD = re.compile(r"\W", re.ASCII)


@dataclass(slots=True)
class Prompt:
    """A prompt as the builder handles it (SillyTavern's ``Prompt``); ``None`` is ``undefined``."""

    identifier: str
    role: str = "system"
    content: str = ""
    name: str = ""
    system_prompt: bool | None = None
    marker: bool = False
    injection_position: int | None = None
    injection_depth: int | None = None
    injection_order: int | None = None
    injection_trigger: tuple[str, ...] = ()
    forbid_overrides: bool = False
    #: Relative extension prompts: "start" or "end" of the main prompt.
    position: str | None = None
    extension: bool = False

    @property
    def absolute(self) -> bool:
        return self.injection_position == INJECTION_ABSOLUTE

    @classmethod
    def from_definition(cls, d: PromptDefinition) -> Prompt:
        fields_set = d.model_fields_set
        return cls(
            identifier=d.identifier or "",
            role=d.role or "system",
            content=d.content or "",
            name=d.name,
            system_prompt=d.system_prompt if "system_prompt" in fields_set else None,
            marker=d.marker,
            injection_position=(
                d.injection_position if "injection_position" in fields_set else None
            ),
            injection_depth=d.injection_depth if "injection_depth" in fields_set else None,
            injection_order=d.injection_order if "injection_order" in fields_set else None,
            injection_trigger=tuple(d.injection_trigger),
            forbid_overrides=d.forbid_overrides,
        )


@dataclass(slots=True)
class PromptCollection:
    """The prompts in order, with a first-occurrence index by identifier (a build looks
    identifiers up a few dozen times). Change ``prompts`` through :meth:`add` and
    :meth:`set`, which keep the index right."""

    prompts: list[Prompt] = field(default_factory=list)
    _index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for i, p in enumerate(self.prompts):
            self._index.setdefault(p.identifier, i)

    def __iter__(self) -> Iterator[Prompt]:
        return iter(self.prompts)

    def index(self, identifier: str) -> int:
        return self._index.get(identifier, -1)

    def get(self, identifier: str) -> Prompt | None:
        i = self._index.get(identifier, -1)
        return self.prompts[i] if i >= 0 else None

    def has(self, identifier: str) -> bool:
        return identifier in self._index

    def add(self, prompt: Prompt) -> None:
        self._index.setdefault(prompt.identifier, len(self.prompts))
        self.prompts.append(prompt)

    def set(self, index: int, prompt: Prompt) -> None:
        """Replace the prompt at ``index`` by one with the same identifier."""
        if prompt.identifier != self.prompts[index].identifier:
            raise ValueError(f"{prompt.identifier!r} cannot take the place of another prompt")
        self.prompts[index] = prompt


@dataclass(slots=True)
class _Order:
    items: Sequence[PromptOrderItem]

    def entry(self, identifier: str) -> PromptOrderItem | None:
        return next((i for i in self.items if i.identifier == identifier), None)

    def disabled(self, identifier: str) -> bool:
        entry = self.entry(identifier)
        return entry is not None and not entry.enabled


def _should_trigger(prompt: Prompt, kind: str) -> bool:
    return not prompt.injection_trigger or kind in prompt.injection_trigger


def _prepare(prompt: Prompt, substitute: Substitute, original: str | None = None) -> Prompt:
    """``prompt`` with its macros expanded, changed in place: every caller hands over a prompt
    made for this build (copying each one cost more than the rest of the preparation)."""
    content = prompt.content
    if content:
        prompt.content = substitute(content, original=original)
    return prompt


def _extension_position(position: int) -> str | None:
    if position == ExtensionPosition.BEFORE_PROMPT:
        return "start"
    if position == ExtensionPosition.IN_PROMPT:
        return "end"
    return None


def _role_name(role: int | None) -> str:
    if isinstance(role, int) and 0 <= role < len(ROLE_NAMES):
        return ROLE_NAMES[role]
    return "system"


@dataclass(slots=True)
class CollectionResult:
    prompts: PromptCollection
    order: _Order

    def disabled(self, identifier: str) -> bool:
        return self.order.disabled(identifier)


@dataclass(frozen=True, slots=True)
class TurnTexts:
    """The texts of this turn the collection places: world info before and after the
    character, the quiet prompt and the user's prompt bias."""

    world_info_before: str = ""
    world_info_after: str = ""
    quiet_prompt: str = ""
    bias: str = ""


def build_prompt_collection(
    state: PromptState,
    preset: ChatCompletionPreset,
    fields: CardFields,
    extension_prompts: Mapping[str, ExtensionPrompt],
    substitute: Substitute,
    *,
    kind: str,
    texts: TurnTexts,
) -> CollectionResult:
    """The preset's prompts in its order (those ``kind`` triggers, evaluated), with the
    system prompts (world info, card fields, impersonation, quiet prompt, nudge, bias,
    extension prompts, persona) put in their markers' places or added."""
    order = _Order(preset.active_order_shared())
    collection = _preset_prompts(preset, order, kind, substitute)
    system_prompts = _system_prompts(preset, fields, substitute, texts)
    system_prompts += _extension_prompts(state, fields, extension_prompts)
    for prompt in system_prompts:
        index = collection.index(prompt.identifier)
        if index >= 0:
            existing = collection.prompts[index]
            prompt.injection_position = existing.injection_position
            prompt.injection_depth = existing.injection_depth
            prompt.injection_order = existing.injection_order
            prompt.role = existing.role or prompt.role
            collection.set(index, _prepare(prompt, substitute))
        else:
            collection.add(_prepare(prompt, substitute))

    _override(collection, order, "main", fields.system, substitute)
    _override(collection, order, "jailbreak", fields.jailbreak, substitute)
    return CollectionResult(collection, order)


def _preset_prompts(
    preset: ChatCompletionPreset, order: _Order, kind: str, substitute: Substitute
) -> PromptCollection:
    """The preset's enabled prompts in its order, those ``kind`` triggers evaluated (the main
    prompt kept, empty, when it is off)."""
    by_id: dict[str, PromptDefinition] = {}
    for definition in preset.effective_prompts_shared():
        if definition.identifier is not None:
            by_id.setdefault(definition.identifier, definition)
    collection = PromptCollection()
    for entry in order.items:
        found = by_id.get(entry.identifier)
        if found is None:
            continue
        prompt = Prompt.from_definition(found)
        if entry.enabled and _should_trigger(prompt, kind):
            collection.add(_prepare(prompt, substitute))
        elif entry.identifier == "main":
            prompt.content = ""
            collection.add(prompt)
    return collection


def _system_prompts(
    preset: ChatCompletionPreset, fields: CardFields, substitute: Substitute, texts: TurnTexts
) -> list[Prompt]:
    """The prompts the build makes itself: world info, the card's fields in the preset's
    formats, the impersonation and quiet prompts, the group nudge and the bias."""

    def fmt(template: str, key: str, value: str) -> str:
        return substitute(template, dynamic={key: value}) if value and template else value

    return [
        Prompt("worldInfoBefore", content=_format_wi(preset.wi_format, texts.world_info_before)),
        Prompt("worldInfoAfter", content=_format_wi(preset.wi_format, texts.world_info_after)),
        Prompt("charDescription", content=fields.description),
        Prompt(
            "charPersonality",
            content=fmt(preset.personality_format, "personality", fields.personality),
        ),
        Prompt("scenario", content=fmt(preset.scenario_format, "scenario", fields.scenario)),
        Prompt(
            "impersonate",
            content=substitute(preset.impersonation_prompt) if preset.impersonation_prompt else "",
        ),
        Prompt("quietPrompt", content=texts.quiet_prompt),
        Prompt("groupNudge", content=substitute(preset.group_nudge_prompt)),
        Prompt("bias", role="assistant", content=texts.bias),
    ]


def _extension_prompts(
    state: PromptState, fields: CardFields, extension_prompts: Mapping[str, ExtensionPrompt]
) -> list[Prompt]:
    """The known extension prompts, the persona description (in the prompt) and the other
    extension prompts placed before or in the prompt."""
    prompts: list[Prompt] = []
    for key, identifier in KNOWN_EXTENSION_KEYS.items():
        ext = extension_prompts.get(key)
        if ext is not None and ext.value:
            prompts.append(
                Prompt(
                    identifier,
                    role=_role_name(ext.role),
                    content=ext.value,
                    position=_extension_position(ext.position),
                )
            )
    if fields.persona and state.persona_position == PersonaPosition.IN_PROMPT:
        prompts.append(Prompt("personaDescription", content=fields.persona))
    for key, ext in extension_prompts.items():
        if key in KNOWN_EXTENSION_KEYS or not ext.value:
            continue
        if ext.position not in (ExtensionPosition.BEFORE_PROMPT, ExtensionPosition.IN_PROMPT):
            continue
        prompts.append(
            Prompt(
                _NON_WORD.sub("_", key),
                role=_role_name(ext.role),
                content=ext.value,
                position=_extension_position(ext.position),
                extension=True,
            )
        )
    return prompts


def _override(
    collection: PromptCollection,
    order: _Order,
    identifier: str,
    text: str,
    substitute: Substitute,
) -> None:
    """A card's own main / post-history prompt replaces the preset's, ``{{original}}`` being
    the preset text, unless the preset forbids it or the prompt is off."""
    current = collection.get(identifier)
    if not text or current is None or current.forbid_overrides or order.disabled(identifier):
        return
    replacement = replace(current, content=text)
    collection.set(collection.index(identifier), _prepare(replacement, substitute, current.content))


def _format_wi(template: str, text: str) -> str:
    """``formatWorldInfo``: nothing for no text; ``{0}`` in ``wi_format`` is the text."""
    if not text:
        return ""
    if not template:
        return text
    return template.replace("{0}", text)
